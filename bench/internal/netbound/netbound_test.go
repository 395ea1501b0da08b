package netbound

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/internal/testutil"
)

// TestMain lets the test binary serve as a node process (node.go), as a
// benchmark's binary does for itself.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == NodeArg {
		os.Exit(NodeMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	os.Exit(testutil.LeakCheck(m.Run(), "scrfs/bench/internal/netbound."))
}

// needAddrs skips the test where 127.0.0.3 cannot be bound.
func needAddrs(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Skipf("127.0.0.3 not usable: %v", err)
	}
	l.Close()
}

// spread is a matrix in which every node of three sends every other a
// different, odd number of bytes (none a multiple of IOSize).
func spread() Traffic {
	return Traffic{
		{0, 5*IOSize + 17, 3},
		{IOSize + 1, 0, 2 * IOSize},
		{7, 0, 0},
	}
}

// TestInProc pushes a matrix over loopback between three addresses (RecvN
// fails unless every byte arrives), then the same with each node's file
// reads and writes.
func TestInProc(t *testing.T) {
	needAddrs(t)
	var nb InProc
	tr := spread()
	s, err := nb.Run(context.Background(), tr, nil)
	if err != nil || s.Wall <= 0 {
		t.Fatalf("run: %+v, %v", s, err)
	}
	if len(nb.bufs) != 2*6 {
		t.Fatalf("%d buffers for 3 pairs, want 12", len(nb.bufs))
	}
	lio, err := NewLocal(filepath.Join(t.TempDir(), "lio"), 3, 2*IOSize+3, IOSize+5, nb.Buffers(1)[0])
	if err != nil {
		t.Fatal(err)
	}
	defer lio.Close()
	samples, err := Measure(context.Background(), &nb, tr, lio, 2)
	if err != nil || len(samples) != 2 {
		t.Fatalf("Measure with local I/O: %v, %v", samples, err)
	}
	if len(nb.bufs) != 2*6+2*3 {
		t.Fatalf("%d buffers, want 18 (a reader and a writer per node more)", len(nb.bufs))
	}
	if _, err := os.Stat(lio.Dst[0]); !os.IsNotExist(err) {
		t.Fatalf("written file left after a run: %v", err)
	}
	// A file shorter than what a run must read fails it.
	os.Truncate(lio.Src[1], 10)
	if _, err := nb.Run(context.Background(), tr, lio); err == nil {
		t.Fatal("run read past a short file")
	}
}

// TestProcs runs the bound with one process per node: one stream, a
// matrix with local I/O, then a node that cannot read its file, whose
// error must come back.
func TestProcs(t *testing.T) {
	needAddrs(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pb := Procs{Self: self}
	ctx := context.Background()
	s, err := pb.Run(ctx, Stream(3*IOSize+5), nil)
	if err != nil || s.Wall <= 0 || s.Used.CPU < 0 {
		t.Fatalf("one stream: %+v, %v", s, err)
	}
	var nb InProc
	lio, err := NewLocal(filepath.Join(t.TempDir(), "lio"), 3, IOSize+1, 2*IOSize, nb.Buffers(1)[0])
	if err != nil {
		t.Fatal(err)
	}
	defer lio.Close()
	if _, err := pb.Run(ctx, spread(), lio); err != nil {
		t.Fatalf("matrix with local I/O: %v", err)
	}
	if _, err := os.Stat(lio.Dst[2]); !os.IsNotExist(err) {
		t.Fatalf("written file left after a run: %v", err)
	}
	os.Remove(lio.Src[1])
	_, err = pb.Run(ctx, spread(), lio)
	if err == nil || !strings.Contains(err.Error(), "node process 1") {
		t.Fatalf("missing file on node 1: %v", err)
	}
}

// TestLocalEach: one stream with the sender reading its file and the
// receiver writing a new one, as a fetch into a read cache does.
func TestLocalEach(t *testing.T) {
	needAddrs(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var nb InProc
	const n = 2*IOSize + 3
	lio, err := NewLocalEach(filepath.Join(t.TempDir(), "lio"), []int64{n, 0}, []int64{0, n}, nb.Buffers(1)[0])
	if err != nil {
		t.Fatal(err)
	}
	defer lio.Close()
	if st, err := os.Stat(lio.Src[1]); err != nil || st.Size() != 0 {
		t.Fatalf("receiver's file to read: %v, %v", st, err)
	}
	if _, err := (Procs{Self: self}).Run(context.Background(), Stream(n), lio); err != nil {
		t.Fatal(err)
	}
	if _, err := NewLocalEach(t.TempDir(), []int64{1}, nil, nb.Buffers(1)[0]); err == nil {
		t.Fatal("readers and writers of different counts accepted")
	}
}

func TestStream(t *testing.T) {
	tr := Stream(42)
	if len(tr) != 2 || tr[0][1] != 42 || tr[0][0]+tr[1][0]+tr[1][1] != 0 {
		t.Fatalf("Stream(42) = %v", tr)
	}
}
