package e2e

import (
	"errors"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Issue 29: while a dataset is written, its names are job-wide. Three
// nodes write one checkpoint the way frameworks and MPI-IO do: rank 0
// makes nested directories the others write into, one node creates a file
// another opens without O_CREAT, two race for an exclusive create, one
// renames and one removes what another made; every call returns with the
// names already on every node, and the completed checkpoint is whole
// everywhere.
func TestNamesWhileWriting(t *testing.T) {
	c := NewCluster(t, 3, "SCRFS_DATASETS_COMPLETE=marker:COMPLETE").Start()
	n0, n1, n2 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	must(t, os.Mkdir(n0.Path("ckpt.1"), 0o755))

	// A directory rank 0 makes is there for the others at once.
	must(t, os.MkdirAll(n0.Path("ckpt.1", "step_100", "model"), 0o750))
	for i, n := range c.Nodes {
		st, err := os.Stat(n.Path("ckpt.1", "step_100", "model"))
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o750 {
			t.Fatalf("node %d: step_100/model right after node 0 made it: %v, %v", i, st, err)
		}
		writeRandom(t, n.Path("ckpt.1", "step_100", "model", "__"+string(rune('0'+i))+"_0.distcp"), 100_000+int64(i), uint64(i))
	}

	// Every rank makes the same directory: one directory, every mkdir
	// succeeds or finds it.
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() {
			if err := os.MkdirAll(n.Path("ckpt.1", "optim"), 0o755); err != nil {
				t.Errorf("node %d: mkdir optim: %v", i, err)
			}
		})
	}
	wg.Wait()

	// A file node 0 creates, node 1 opens without O_CREAT (reading).
	must(t, os.WriteFile(n0.Path("ckpt.1", "meta.json"), []byte(`{"step": 100}`), 0o644))
	if b, err := os.ReadFile(n1.Path("ckpt.1", "meta.json")); err != nil || len(b) != 0 {
		t.Fatalf("node 1 reads meta.json node 0 created: %q, %v (while written, a node shows its own bytes)", b, err)
	}

	// O_EXCL from two nodes at once: exactly one wins.
	errs := make([]error, 2)
	for i, n := range []*Node{n1, n2} {
		wg.Go(func() {
			f, err := os.OpenFile(n.Path("ckpt.1", "writer.lock"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err == nil {
				f.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if won := slices.IndexFunc(errs, func(err error) bool { return err == nil }); won < 0 || !errors.Is(errs[1-won], syscall.EEXIST) {
		t.Fatalf("exclusive creates on nodes 1 and 2: %v", errs)
	}

	// Renamed on node 0, as a framework moves a pointer into place: every
	// node sees the new name only.
	must(t, os.WriteFile(n0.Path("ckpt.1", "latest.tmp"), []byte("step_100"), 0o644))
	if _, err := os.Stat(n2.Path("ckpt.1", "latest.tmp")); err != nil {
		t.Fatalf("node 2 does not see latest.tmp: %v", err)
	}
	must(t, os.Rename(n0.Path("ckpt.1", "latest.tmp"), n0.Path("ckpt.1", "latest")))
	if _, err := os.Stat(n2.Path("ckpt.1", "latest")); err != nil {
		t.Fatalf("node 2 does not see the renamed latest: %v", err)
	}
	if _, err := os.Stat(n2.Path("ckpt.1", "latest.tmp")); !os.IsNotExist(err) {
		t.Fatalf("node 2 still sees latest.tmp after the rename: %v", err)
	}

	// Removed on node 2, made on node 1: gone everywhere.
	must(t, os.WriteFile(n1.Path("ckpt.1", "scratch.bin"), []byte("scratch"), 0o644))
	must(t, os.Remove(n2.Path("ckpt.1", "scratch.bin")))
	for i, n := range c.Nodes {
		if _, err := os.Stat(n.Path("ckpt.1", "scratch.bin")); !os.IsNotExist(err) {
			t.Fatalf("node %d: scratch.bin after node 2 removed it: %v", i, err)
		}
	}

	// Listed on any node: every name, wherever it was made.
	want := []string{"__0_0.distcp", "__1_0.distcp", "__2_0.distcp"}
	for i, n := range c.Nodes {
		if got := dirNames(t, n.Path("ckpt.1", "step_100", "model")); !slices.Equal(got, want) {
			t.Fatalf("node %d lists step_100/model as %v, want %v", i, got, want)
		}
	}

	// Complete: the checkpoint is whole on every node, names looked up
	// but never written here gone from this node's share.
	sums := map[string]string{}
	for _, n := range c.Nodes {
		for p, s := range treeSums(t, n.CacheDir("ckpt.1")) {
			if s != sha256hex(nil) {
				sums[p] = s
			}
		}
	}
	must(t, os.WriteFile(n0.Path("ckpt.1", "COMPLETE"), nil, 0o644))
	c.WaitState(60*time.Second, "ckpt.1", "protected")
	sums["COMPLETE"] = sha256hex(nil)
	sums["writer.lock"] = sha256hex(nil)
	for i, n := range c.Nodes {
		sameSums(t, "node "+string(rune('0'+i))+"'s mount after completion", treeSums(t, n.Path("ckpt.1")), sums)
		if ds := n.Dataset("ckpt.1"); ds == nil || ds.SharedFiles != 0 {
			t.Fatalf("node %d: status of ckpt.1: %+v", i, ds)
		}
	}
}

// dirNames lists directory p, sorted.
func dirNames(t *testing.T, p string) []string {
	t.Helper()
	es, err := os.ReadDir(p)
	must(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
