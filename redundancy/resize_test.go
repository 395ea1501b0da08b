package redundancy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/node/nodetest"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
	"github.com/scrfs/scrfs/transfer"
)

// TestRestartOnFewerNodesAndBack: a job of four restarted on three keeps
// node 3's share on node 0 (the node of the nearest intact rank to its
// right), rebuilt once, readable from every node, degraded and saying why;
// back on four nodes, node 3's own copy is found intact, the record follows
// it home and the set is protected again — nothing deleted on the way.
// Issue 12's items 3 and 4.
func TestRestartOnFewerNodesAndBack(t *testing.T) {
	for _, p := range []schemes.Params{xor, rs2, partner} {
		t.Run(p.Kind.String(), func(t *testing.T) {
			f := newFixture(t, p, memnet.Faults{})
			f.startAll()
			f.write("ckpt.1", 60<<10)
			f.complete(0, "ckpt.1")
			f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
			for i := range 4 {
				f.Kill(i)
			}

			f.Resize(3)
			f.RestartAll()
			f.Wait(wait, "ckpt.1 degraded on nodes 0-2, node 0 holding two shares", func() string { return f.Describe("ckpt.1") }, func() bool {
				for _, i := range f.All() {
					if st, why := f.Nodes[i].State("ckpt.1"); st != cache.Degraded || !strings.Contains(why, "node 0 holds the shares of two members") {
						return false
					}
				}
				return true
			})
			f.checkFiles("ckpt.1", 0, 1, 2)
			ds := f.Nodes[0].Store.Get("ckpt.1")
			rec, err := record.Load(ds.Dir())
			if err != nil {
				t.Fatal(err)
			}
			id3 := rec.Set(0)[3].ID
			if got := rec.Member(id3).HeldBy(); got != f.Nodes[0].Store.NodeID() {
				t.Fatalf("node 3's share held by %s, want node 0", got)
			}
			f.mu.Lock()
			want3 := f.written["ckpt.1"][3]
			f.mu.Unlock()
			if got := sums(t, layout.HostedDir(ds.Dir(), id3)); !maps.Equal(got, want3) {
				t.Fatalf("node 0 hosts %v of node 3's files, node 3 wrote %v", got, want3)
			}
			// Every node reads node 3's files from node 0.
			for _, i := range f.All() {
				v := f.p(i).Namespace.View("ckpt.1")
				for path, sum := range want3 {
					e, ok := v.Lookup(path)
					if !ok {
						t.Fatalf("node %d does not show %s", i, path)
					}
					b, err := f.ReadFile(nodetest.Ctx(t), i, "ckpt.1", e, 1<<20)
					if err != nil {
						t.Fatalf("node %d reads %s: %v", i, path, err)
					}
					if got := sumOf(b); got != sum {
						t.Fatalf("node %d reads %s with sha256 %s, written %s", i, path, got, sum)
					}
				}
			}
			// The job goes on on three nodes.
			f.write("ckpt.2", 30<<10)
			f.complete(1, "ckpt.2")
			f.WaitState(wait, "ckpt.2", cache.Protected, f.All()...)
			for i := range 3 {
				f.Kill(i)
			}

			f.Resize(4)
			f.RestartAll()
			f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
			f.WaitState(wait, "ckpt.2", cache.Protected, 0, 1, 2)
			f.checkFiles("ckpt.1", f.All()...)
			f.checkFiles("ckpt.2", 0, 1, 2)
			if _, err := os.Stat(layout.HostedDir(ds.Dir(), id3)); !os.IsNotExist(err) {
				t.Fatalf("node 0 still hosts node 3's share: %v", err)
			}
			for _, i := range f.All() {
				r, err := record.Load(f.Nodes[i].Store.Get("ckpt.1").Dir())
				if err != nil {
					t.Fatal(err)
				}
				if got := r.Member(id3).HeldBy(); got != id3 {
					t.Fatalf("node %d: node 3's share held by %s after it came back", i, got)
				}
			}
		})
	}
}

// sums returns the sha256 of every regular file under dir, by slash path.
func sums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if e.IsDir() && rel == layout.MetaDir {
			return filepath.SkipDir
		}
		if e.Type().IsRegular() {
			out[filepath.ToSlash(rel)] = sum1(t, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func sum1(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestRestartInAnotherOrder: the job restarts with its hosts in another
// order (a scheduler reassigned them). Every share is recognised by its
// identity whatever its node's new index: nothing is rebuilt or lost, reads
// find every file, new checkpoints are protected, and a later loss is
// rebuilt under each dataset's record.
func TestRestartInAnotherOrder(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 60<<10)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.mu.Lock()
	wrote := maps.Clone(f.written["ckpt.1"])
	f.mu.Unlock()
	for i := range 4 {
		f.Kill(i)
	}
	f.Swap(0, 2)
	f.Swap(1, 3)
	f.RestartAll()
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	moved := map[int]int{0: 2, 1: 3, 2: 0, 3: 1} // new index → index that wrote
	for now, was := range moved {
		if got := f.Nodes[now].Sums("ckpt.1"); !maps.Equal(got, wrote[was]) {
			t.Fatalf("node %d (was %d) holds %v, wrote %v", now, was, got, wrote[was])
		}
	}
	for _, i := range f.All() {
		for _, files := range wrote {
			for path, sum := range files {
				e, ok := f.p(i).Namespace.View("ckpt.1").Lookup(path)
				if !ok {
					t.Fatalf("node %d does not show %s", i, path)
				}
				b, err := f.ReadFile(nodetest.Ctx(t), i, "ckpt.1", e, 1<<20)
				if err != nil {
					t.Fatalf("node %d reads %s: %v", i, path, err)
				}
				if got := sumOf(b); got != sum {
					t.Fatalf("node %d reads %s with sha256 %s, written %s", i, path, got, sum)
				}
			}
		}
	}
	f.write("ckpt.2", 30<<10)
	f.complete(3, "ckpt.2")
	f.WaitState(wait, "ckpt.2", cache.Protected, f.All()...)
	f.Kill(1)
	f.Wipe(1)
	<-f.restart(1)
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.WaitState(wait, "ckpt.2", cache.Protected, f.All()...)
	if got := f.Nodes[1].Sums("ckpt.1"); !maps.Equal(got, wrote[3]) {
		t.Fatalf("replacement of node 1 rebuilt %v of ckpt.1, its writer (node 3 then) wrote %v", got, wrote[3])
	}
	f.checkFiles("ckpt.2", f.All()...)
}

// TestRestartBelowToleranceKeeps (issue 26's first item): a job of four
// restarted on two cannot rebuild its XOR checkpoint: it fails on both,
// not served, each keeping its files; back on four nodes it is verified
// and served again, whole, on every node.
func TestRestartBelowToleranceKeeps(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	f.protect("ckpt.1", 40<<10)
	f.mu.Lock()
	wrote := maps.Clone(f.written["ckpt.1"])
	f.mu.Unlock()
	for i := range 4 {
		f.Kill(i)
	}
	f.Resize(2)
	f.RestartAll()
	f.WaitState(wait, "ckpt.1", cache.Failed, 0, 1)
	for _, i := range f.All() {
		st := f.Nodes[i].Store
		kept := st.Kept()
		if len(kept) != 1 || kept[0].Name() != "ckpt.1" || st.Get("ckpt.1") != nil {
			t.Fatalf("node %d keeps %v", i, kept)
		}
		if got := sums(t, kept[0].Dir()); !maps.Equal(got, wrote[i]) {
			t.Fatalf("node %d kept %v, wrote %v", i, got, wrote[i])
		}
		if _, why := f.Nodes[i].State("ckpt.1"); !strings.Contains(why, "the members nodes 2, 3 wrote") || !strings.Contains(why, "kept") {
			t.Errorf("node %d: failed saying %q", i, why)
		}
	}
	for i := range 2 {
		f.Kill(i)
	}
	f.Resize(4)
	f.RestartAll()
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
}

// TestWipedNodeRestoresFromCache (issue 26): a wiped node that rejoins the
// running job is rebuilt, and says it restored the job's checkpoint from
// the caches — not that it found none and starts empty (it logged that
// as an error before).
func TestWipedNodeRestoresFromCache(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	f.protect("ckpt.1", 20<<10)
	f.Kill(2)
	f.Wipe(2)
	<-f.restart(2)
	f.WaitState(wait, "ckpt.1", cache.Protected, 2)
	if r := f.p(2).Flusher.Restored(); r == nil || r.Dataset != "ckpt.1" || r.From != transfer.FromCache {
		t.Fatalf("node 2 restored %+v, want ckpt.1 from the caches", r)
	}
}
