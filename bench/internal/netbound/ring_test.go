package netbound

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// TestXORRing runs the ring's members in this process over loopback and
// checks every member stored the XOR of its row across the others'
// chunks (redset's layout: a member's p−1 chunks around a zero chunk at
// its own row), with a chunk of two pieces and a short last one; each
// member reads its checkpoint in the cache, or fetches it, and then its
// staged copy must hold every byte of it.
func TestXORRing(t *testing.T) {
	needAddrs(t)
	for _, fetched := range []bool{false, true} {
		for _, p := range []int{2, 3, 4} {
			ring := XORRing{Chunk: 2*ringBlock*2 + 1000, Piece: 2 * ringBlock}
			dir := t.TempDir()
			name := func(kind string, q int) string { return filepath.Join(dir, fmt.Sprint(kind, q)) }
			data := make([][]byte, p)
			for q := range p {
				data[q] = make([]byte, int64(p-1)*ring.Chunk)
				rand.Read(data[q])
				if err := os.WriteFile(name("src", q), data[q], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// conns[q] is q's connection to its right neighbour; its far end
			// is that neighbour's left one.
			toRight, fromLeft := make([]*net.TCPConn, p), make([]*net.TCPConn, p)
			for q := range p {
				a, b, err := connectPair(context.Background(), "127.0.0.1", "127.0.0.2")
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				defer b.Close()
				toRight[q], fromLeft[(q+1)%p] = a, b
			}
			errs := make([]error, p)
			var wg sync.WaitGroup
			for q := range p {
				var src source
				var err error
				if fetched {
					src, err = openFetch(name("src", q), name("stage", q), ring.Chunk, p-1)
				} else {
					src, err = openCache(name("src", q))
				}
				if err != nil {
					t.Fatal(err)
				}
				m, err := newRingMember(ring, q, p, fromLeft[q], toRight[q], src, name("dst", q))
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer m.close()
					errs[q] = m.run()
				}()
			}
			wg.Wait()
			for q := range p {
				if errs[q] != nil {
					t.Fatalf("fetched %v, p=%d member %d: %v", fetched, p, q, errs[q])
				}
				want := make([]byte, ring.Chunk)
				for s := range p {
					if s == q {
						continue
					}
					c := q
					if q > s {
						c = q - 1
					}
					for i := range want {
						want[i] ^= data[s][int64(c)*ring.Chunk+int64(i)]
					}
				}
				if got := mustRead(t, name("dst", q)); !bytes.Equal(got, want) {
					t.Fatalf("fetched %v, p=%d: member %d stored %d bytes, not its row's parity (%d bytes)", fetched, p, q, len(got), len(want))
				}
				if fetched && !bytes.Equal(mustRead(t, name("stage", q)), data[q]) {
					t.Fatalf("p=%d: member %d's staged copy is not its checkpoint", p, q)
				}
			}
		}
	}
}

// TestFetchAlone fetches a checkpoint of three chunks into its staged
// copy as (f0) does, and checks every byte arrived.
func TestFetchAlone(t *testing.T) {
	dir := t.TempDir()
	const chunk, chunks = 3*ringBlock + 7, 3
	data := make([]byte, chunk*chunks)
	rand.Read(data)
	src, stage := filepath.Join(dir, "src"), filepath.Join(dir, "stage")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fs, err := openFetch(src, stage, chunk, chunks)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.close()
	if err := fetchAlone(fs, chunk, [][]byte{touched(ringBlock), touched(ringBlock), touched(ringBlock)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustRead(t, stage), data) {
		t.Fatal("the staged copy is not the checkpoint")
	}
}

// mustRead returns the bytes of the file at path.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProcsCopies runs the ring (redbench's (d)) and the checked streams
// ((c′)) with one process per node, as redbench does, each over copies of
// the checkpoints that every run writes afresh, and then in one process,
// which refuses them.
func TestProcsCopies(t *testing.T) {
	needAddrs(t)
	procs, ring, traffic, lio := procsJob(t)
	for _, c := range []struct {
		name string
		make func() (*Local, error)
	}{
		{"ring", func() (*Local, error) { return lio.WithXORRing(ring) }},
		{"checked", lio.WithChecks},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := c.make()
			if err != nil {
				t.Fatal(err)
			}
			before := inodes(t, l.Src)
			if s, err := procs.Run(context.Background(), traffic, l); err != nil || s.Used.CPU <= 0 {
				t.Fatalf("in node processes: %+v, %v", s, err)
			}
			for q, ino := range inodes(t, l.Src) {
				if ino == before[q] {
					t.Errorf("node %d read its checkpoint copy as it was, not written afresh", q)
				}
			}
			var nb InProc
			if _, err := nb.Run(context.Background(), traffic, l); err == nil {
				t.Fatal("ran in one process")
			}
		})
	}
}

// inodes returns the inode numbers of the files at paths.
func inodes(t *testing.T, paths []string) []uint64 {
	var out []uint64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fi.Sys().(*syscall.Stat_t).Ino)
	}
	return out
}

// TestProcsFetch runs (f0) and (f) with one process per node, as redbench
// does: the page cache dropped before each run, so as root only.
func TestProcsFetch(t *testing.T) {
	needAddrs(t)
	if os.Geteuid() != 0 {
		t.Skip("dropping the page cache between runs needs root")
	}
	procs, ring, traffic, lio := procsJob(t)
	fed, alone, err := lio.WithFetch(t.TempDir(), ring)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Local{alone, fed} {
		if s, err := procs.Run(context.Background(), traffic, l); err != nil || s.Used.CPU <= 0 {
			t.Fatalf("fetch alone %v, in node processes: %+v, %v", l.fetchAlone, s, err)
		}
		for _, st := range l.Stage {
			if _, err := os.Stat(st); !os.IsNotExist(err) {
				t.Errorf("staged copy %s left after the run: %v", st, err)
			}
		}
	}
}

// procsJob returns what TestProcsCopies and TestProcsFetch run: node
// processes of this test binary, a ring of 3 with a short last piece, its
// traffic, and the checkpoints of (c), removed when the test ends.
func procsJob(t *testing.T) (Procs, XORRing, Traffic, *Local) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const p = 3
	ring := XORRing{Chunk: 3*ringBlock + 5, Piece: 2 * ringBlock}
	traffic := Traffic{{0, 2 * ring.Chunk, 0}, {0, 0, 2 * ring.Chunk}, {2 * ring.Chunk, 0, 0}}
	var nb InProc
	lio, err := NewLocal(filepath.Join(t.TempDir(), "lio"), p, 2*ring.Chunk, ring.Chunk, nb.Buffers(1)[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lio.Close() })
	return Procs{Self: self}, ring, traffic, lio
}
