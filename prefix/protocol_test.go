package prefix

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestProtocol runs the whole multi-node flush of one dataset, then the
// restart side (Newest, ReadManifest, Fetch of each node's share), a
// re-flush, and RemoveDataset.
func TestProtocol(t *testing.T) {
	ctx := context.Background()
	prefix := fastDir(t)
	lg, _ := newTestLogger(t, false)
	const nodes = 3
	caches := make([]string, nodes)
	for i := range caches {
		caches[i] = fastDir(t)
		src := filepath.Join(caches[i], "ckpt.7")
		if i != 2 { // node 2 wrote nothing
			writeFile(t, filepath.Join(src, "out", "rank_"+string(rune('0'+i))), 10000+i, uint64(i))
		} else {
			must(t, os.MkdirAll(src, 0o755))
		}
	}

	must(t, dirBeginFlush(ctx, prefix, IndexEntry{Name: "ckpt.7", ID: 7, Nodes: nodes}, lg))
	ix, err := dirReadIndex(prefix)
	must(t, err)
	if e, _ := ix.Lookup("ckpt.7"); e.State != StateFlushing {
		t.Fatalf("after BeginFlush: %+v", e)
	}
	if _, ok := ix.Newest(nil); ok {
		t.Error("a flushing dataset is offered for fetch")
	}
	for i := range nodes {
		es, err := dirFlush(ctx, filepath.Join(caches[i], "ckpt.7"), filepath.Join(prefix, "ckpt.7"), i, listed(t, filepath.Join(caches[i], "ckpt.7")), Options{CRC: true, Logger: lg})
		must(t, err)
		must(t, dirWritePart(prefix, "ckpt.7", i, es))
	}
	m, err := dirCompleteFlush(ctx, prefix, "ckpt.7", nodes, lg)
	must(t, err)

	ix, err = dirReadIndex(prefix)
	must(t, err)
	e, ok := ix.Newest(nil)
	if !ok || e.Name != "ckpt.7" || e.State != StateComplete || e.Files != 2 || e.Bytes != 20001 || e.Nodes != nodes || e.Flushed.IsZero() {
		t.Fatalf("index entry after CompleteFlush: %+v", e)
	}

	// Restart: every node fetches its share into a wiped cache.
	m2, err := dirReadManifest(prefix, e.Name)
	must(t, err)
	m2.Created = m.Created
	if !reflect.DeepEqual(m, m2) {
		t.Error("manifest read back differs")
	}
	for i := range nodes {
		dst := filepath.Join(fastDir(t), "ckpt.7")
		must(t, dirFetch(ctx, filepath.Join(prefix, "ckpt.7"), dst, m2.ForNodes([]int{i}), Options{CRC: true, Logger: lg}))
		if got, want := treeOf(t, dst), treeOf(t, filepath.Join(caches[i], "ckpt.7")); !reflect.DeepEqual(got, want) {
			t.Errorf("node %d fetched %v, had %v", i, got, want)
		}
	}

	// A failed fetch takes it out of the running.
	must(t, dirUpdateIndex(ctx, prefix, lg, func(ix *Index) error {
		return ix.AddFetchFailure("ckpt.7", FetchFailure{Node: 1, Reason: "corrupt"})
	}))
	ix, _ = dirReadIndex(prefix)
	if _, ok := ix.Newest(nil); ok {
		t.Error("a dataset with a failed fetch is still offered")
	}

	// Re-flush: BeginFlush demotes it and drops the old manifests first.
	must(t, dirBeginFlush(ctx, prefix, IndexEntry{Name: "ckpt.7", ID: 7, Nodes: nodes}, lg))
	if _, err := dirReadManifest(prefix, "ckpt.7"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old manifest survives BeginFlush: %v", err)
	}
	ix, _ = dirReadIndex(prefix)
	if e, _ := ix.Lookup("ckpt.7"); e.State != StateFlushing || len(e.FailedFetches) != 0 {
		t.Errorf("after second BeginFlush: %+v", e)
	}

	must(t, dirRemoveDataset(ctx, prefix, "ckpt.7", lg))
	ix, _ = dirReadIndex(prefix)
	if _, ok := ix.Lookup("ckpt.7"); ok {
		t.Error("removed dataset still in the index")
	}
	for _, p := range []string{filepath.Join(prefix, "ckpt.7"), manifestDir(prefix, "ckpt.7")} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s survives RemoveDataset", p)
		}
	}
	must(t, dirRemoveDataset(ctx, prefix, "ckpt.7", lg)) // idempotent
	must(t, dirRemoveDataset(ctx, fastDir(t), "never", lg))
}

// TestCompleteFlushMissingPart: a node that never reported keeps the
// dataset out of the index's complete set.
func TestCompleteFlushMissingPart(t *testing.T) {
	ctx := context.Background()
	prefix := fastDir(t)
	must(t, dirBeginFlush(ctx, prefix, IndexEntry{Name: "ckpt.1", ID: 1, Nodes: 2}, nil))
	must(t, dirWritePart(prefix, "ckpt.1", 0, nil))
	if _, err := dirCompleteFlush(ctx, prefix, "ckpt.1", 2, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v", err)
	}
	ix, _ := dirReadIndex(prefix)
	if e, _ := ix.Lookup("ckpt.1"); e.State != StateFlushing {
		t.Errorf("state %q", e.State)
	}
}

// TestRemoveDatasetReadOnlyDirs: a tree the user made read-only is removed
// all the same.
func TestRemoveDatasetReadOnlyDirs(t *testing.T) {
	prefix := fastDir(t)
	writeFile(t, filepath.Join(prefix, "ckpt.1", "d", "f"), 10, 1)
	must(t, os.Chmod(filepath.Join(prefix, "ckpt.1", "d"), 0o500))
	must(t, dirRemoveDataset(context.Background(), prefix, "ckpt.1", nil))
	if _, err := os.Stat(filepath.Join(prefix, "ckpt.1")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("not removed")
	}
}

// TestBeginFlushSweepsLeftovers: what a flush killed while it wrote left
// under temporary names (a retry by another node index writes under other
// ones) is gone once the next flush begins; the dataset's files stay.
func TestBeginFlushSweepsLeftovers(t *testing.T) {
	ctx := context.Background()
	prefix := fastDir(t)
	writeFile(t, filepath.Join(prefix, "ckpt.1", "d", "f.bin"), 10, 1)
	writeFile(t, filepath.Join(prefix, "ckpt.1", "d", ".f.bin"+tmpInfix+"3"), 10, 2)
	writeFile(t, filepath.Join(prefix, "ckpt.1", ".shared.bin"+tmpInfix+"1"), 10, 3)
	must(t, dirBeginFlush(ctx, prefix, IndexEntry{Name: "ckpt.1", ID: 1, Nodes: 2}, nil))
	for _, p := range []string{"d/.f.bin" + tmpInfix + "3", ".shared.bin" + tmpInfix + "1"} {
		if _, err := os.Lstat(filepath.Join(prefix, "ckpt.1", p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left by an unfinished flush is still there after the next began: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(prefix, "ckpt.1", "d", "f.bin")); err != nil {
		t.Errorf("a flushed file went with the leftovers: %v", err)
	}
	must(t, dirBeginFlush(ctx, prefix, IndexEntry{Name: "ckpt.2", ID: 2, Nodes: 2}, nil)) // nothing flushed yet
}
