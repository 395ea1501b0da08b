package namespace_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/namespace"
	"github.com/scrfs/scrfs/node"
	"github.com/scrfs/scrfs/node/nodetest"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
)

// node/nodetest has no tests of its own: the tests that run whole jobs on
// it check its goroutines too, and those of the nodes and stores it opens.
func TestMain(m *testing.M) {
	testutil.LeakCheckMain(m, "scrfs/namespace.", "scrfs/node.", "scrfs/node/nodetest.", "scrfs/cache.")
}

const wait = 20 * time.Second

// dcpJob is four nodes under the given scheme with a DCP-like checkpoint:
// a shard per rank, node 0's .metadata and replicated tensor file, a
// config.json every rank writes alike, and shared.bin, which every rank
// writes a part of (MPI-IO), the header too.
func dcpJob(t *testing.T, scheme layout.Scheme, faults memnet.Faults) (*nodetest.Job, map[string][]byte) {
	j := nodetest.New(t, 4, faults, nodetest.Config{
		Scheme: scheme, SetSize: 4,
		Options: node.Options{Timeout: time.Second, ConnectTimeout: time.Second, MemberTimeout: 2 * time.Second},
	})
	j.RestartAll()
	want := map[string][]byte{}
	for _, n := range j.Nodes {
		files := map[string][]byte{
			"__" + string(rune('0'+n.Index)) + "_0.distcp": bytes(n.Index, 300<<10),
			"config.json": []byte(`{"model": "dcp"}`),
		}
		if n.Index == 0 {
			files[".metadata"] = []byte("metadata")
			files["shared/replicated.pt"] = bytes(99, 1<<20)
		}
		n.Write("dcp_200", files)
		maps.Copy(want, files)
		n.WriteAt("dcp_200", "shared.bin", 0, sharedBin[:sharedHead])
		part := sharedBin[sharedHead+n.Index*sharedPart : sharedHead+(n.Index+1)*sharedPart]
		n.WriteAt("dcp_200", "shared.bin", int64(sharedHead+n.Index*sharedPart), part)
	}
	want["shared.bin"] = sharedBin
	if err := j.Nodes[0].Protocols.Complete.Complete(context.Background(), "dcp_200"); err != nil {
		t.Fatal(err)
	}
	j.WaitState(wait, "dcp_200", cache.Protected, j.All()...)
	return j, want
}

// shared.bin: a header every rank writes, then a part of each rank's, the
// parts not on block boundaries.
const (
	sharedHead = 4096 + 17
	sharedPart = 700<<10 + 3
)

var sharedBin = bytes(5, sharedHead+4*sharedPart)

func bytes(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + seed*7 + i/1000)
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// open opens path p of dataset on node i: the path of a whole copy, or the
// copy being fetched.
func open(t *testing.T, j *nodetest.Job, i int, dataset, p string) (string, *namespace.Remote, error) {
	t.Helper()
	return j.Nodes[i].Protocols.Namespace.Open(context.Background(), dataset, lookup(t, j, i, dataset, p))
}

func lookup(t *testing.T, j *nodetest.Job, i int, dataset, p string) *record.Entry {
	t.Helper()
	v := j.Nodes[i].Protocols.Namespace.View(dataset)
	if v == nil {
		t.Fatalf("node %d has no view of %s", i, dataset)
	}
	e, ok := v.Lookup(p)
	if !ok {
		t.Fatalf("node %d: %s/%s not in the view", i, dataset, p)
	}
	return e
}

// readChunks reads path p of dataset on node i whole, in reads of chunk
// bytes.
func readChunks(t *testing.T, j *nodetest.Job, i int, dataset, p string, chunk int) ([]byte, error) {
	t.Helper()
	return j.ReadFile(context.Background(), i, dataset, lookup(t, j, i, dataset, p), chunk)
}

// read reads path p of dataset on node i whole.
func read(t *testing.T, j *nodetest.Job, i int, dataset, p string) ([]byte, error) {
	t.Helper()
	return readChunks(t, j, i, dataset, p, 128<<10)
}

// TestEveryNodeReadsEveryFile: each node lists the union of the trees and
// reads every file byte-identical, its own copy of a clashing path and the
// lowest node's copy otherwise.
func TestEveryNodeReadsEveryFile(t *testing.T) {
	j, want := dcpJob(t, layout.Scheme{Kind: layout.KindXOR}, memnet.Faults{})
	for _, n := range j.Nodes {
		v := n.Protocols.Namespace.View("dcp_200")
		var names []string
		for _, e := range v.ReadDir(".") {
			names = append(names, e.Path)
		}
		if got := strings.Join(names, " "); got != ".metadata __0_0.distcp __1_0.distcp __2_0.distcp __3_0.distcp config.json shared shared.bin" {
			t.Errorf("node %d lists %s", n.Index, got)
		}
		for p, b := range want {
			got, err := read(t, j, n.Index, "dcp_200", p)
			if err != nil || sum(got) != sum(b) {
				t.Errorf("node %d: %s: %d bytes, %v", n.Index, p, len(got), err)
			}
		}
		if v.SharedFiles() != 2 {
			t.Errorf("node %d counts %d shared files, want 2 (config.json and shared.bin)", n.Index, v.SharedFiles())
		}
	}
}

// TestReadersShareOneTransfer: several readers of one remote file on one
// node move its bytes once.
func TestReadersShareOneTransfer(t *testing.T) {
	var sent sync.Map
	j, want := dcpJob(t, layout.Scheme{Kind: layout.KindXOR}, memnet.Faults{
		Call: func(from, to int, kind string) memnet.Drop {
			if kind == "namespace.read" {
				n, _ := sent.LoadOrStore(from, new(int))
				*n.(*int)++
			}
			return memnet.Deliver
		},
	})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			got, err := read(t, j, 2, "dcp_200", "shared/replicated.pt")
			if err != nil || sum(got) != sum(want["shared/replicated.pt"]) {
				t.Errorf("reader: %d bytes, %v", len(got), err)
			}
		})
	}
	wg.Wait()
	if n, _ := sent.Load(2); n == nil || *n.(*int) != 1 {
		t.Fatalf("node 2 asked node 0 %v times for the file, want once", n)
	}
}

// TestCorruptHolderNeverServes: a file changed on its holder after it was
// protected is refused, never served.
func TestCorruptHolderNeverServes(t *testing.T) {
	j, _ := dcpJob(t, layout.Scheme{Kind: layout.KindXOR}, memnet.Faults{})
	p := filepath.Join(j.Nodes[1].Store.Get("dcp_200").Dir(), "__1_0.distcp")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := read(t, j, 3, "dcp_200", "__1_0.distcp"); !errors.Is(err, schemes.ErrCorrupt) {
		t.Fatalf("read of a corrupted file: %v, want ErrCorrupt", err)
	}
}

// TestHolderDownWaitsThenFails: a read from a holder that is gone waits at
// most member_timeout and then fails, naming the node; once a replacement
// is rebuilt, the read succeeds.
func TestHolderDownWaitsThenFails(t *testing.T) {
	j, want := dcpJob(t, layout.Scheme{Kind: layout.KindXOR}, memnet.Faults{})
	j.Kill(1)
	start := time.Now()
	_, err := read(t, j, 3, "dcp_200", "__1_0.distcp")
	if err == nil || !strings.Contains(err.Error(), "node 1") || time.Since(start) > 10*time.Second {
		t.Fatalf("read from a node that is down: %v after %v", err, time.Since(start))
	}
	j.Wipe(1)
	<-j.Restart(1)
	j.WaitState(wait, "dcp_200", cache.Protected, 1)
	got, err := read(t, j, 3, "dcp_200", "__1_0.distcp")
	if err != nil || sum(got) != sum(want["__1_0.distcp"]) {
		t.Fatalf("read after the rebuild: %d bytes, %v", len(got), err)
	}
}

// TestPartnerCopyServesWhileHolderDown: under PARTNER, a file whose holder
// is down is read at once from a partner's copy, byte for byte; a copy that
// no longer matches what was protected is never served.
func TestPartnerCopyServesWhileHolderDown(t *testing.T) {
	j, want := dcpJob(t, layout.Scheme{Kind: layout.KindPartner, Replicas: 1}, memnet.Faults{})
	j.Kill(1)
	start := time.Now()
	got, err := read(t, j, 3, "dcp_200", "__1_0.distcp")
	if err != nil || sum(got) != sum(want["__1_0.distcp"]) {
		t.Fatalf("read while the holder is down: %d bytes, %v", len(got), err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("the copy took %v: it should not wait for the holder", time.Since(start))
	}
	// Node 2 keeps node 1's copy; damage it and read again on another node.
	red, err := filepath.Glob(filepath.Join(j.Nodes[2].Store.Get("dcp_200").Dir(), ".scrfs", "*.redset"))
	if err != nil || len(red) != 1 {
		t.Fatalf("node 2's redundancy file: %v %v", red, err)
	}
	b, err := os.ReadFile(red[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := 64; i < len(b)/2; i += 4096 {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(red[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := read(t, j, 0, "dcp_200", "__1_0.distcp"); err == nil {
		t.Fatalf("a damaged copy was served: %d bytes", len(got))
	}
}
