package cache

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// recordDataset writes dataset name with a file of n apparent bytes (sparse)
// and one in a subdirectory, completes it and gives it its record, seq.
func (ts *testStore) recordDataset(t *testing.T, name string, n int64, seq uint64) {
	t.Helper()
	ts.completeDataset(t, name, n)
	must(t, ts.SetRecord(name, seq, time.Now()))
}

// completeDataset writes dataset name as recordDataset does and completes it.
func (ts *testStore) completeDataset(t *testing.T, name string, n int64) {
	t.Helper()
	d := ts.write(t, name, "f", 0)
	must(t, os.Truncate(filepath.Join(d.Dir(), "f"), n))
	must(t, os.MkdirAll(filepath.Join(d.Dir(), "sub/dir"), 0o700))
	must(t, os.WriteFile(filepath.Join(d.Dir(), "sub/dir/g"), []byte("g"), 0o600))
	must(t, ts.RequestComplete(name, "test"))
	ts.awaitComplete(t, name)
}

// trashEntries lists what the trash holds.
func (ts *testStore) trashEntries(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(ts.trashDir())
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// mustEmptyAtOnce empties the trash and fails unless nothing made it wait.
func (ts *testStore) mustEmptyAtOnce(t *testing.T) {
	t.Helper()
	if wait := ts.emptyTrash(); wait != 0 {
		t.Fatalf("deletes wait %v", wait)
	}
	if got := ts.trashEntries(t); len(got) != 0 {
		t.Fatalf("trash holds %v", got)
	}
}

// awaitEmptyTrash waits for the store's emptier to empty the trash.
func (ts *testStore) awaitEmptyTrash(t *testing.T) {
	t.Helper()
	if !testutil.Poll(10*time.Second, func() bool { return len(ts.trashEntries(t)) == 0 }) {
		t.Fatalf("the trash still holds %v", ts.trashEntries(t))
	}
}

// TestDeletesWaitForRedundancy: a dataset evicted (c1, once c2 settled)
// while another one's redundancy is being applied (c3's) stays in the
// trash until that is settled, and is deleted then, subdirectories and
// all.
func TestDeletesWaitForRedundancy(t *testing.T) {
	ts := newTestStore(t, Rules{}, 1)
	ts.recordDataset(t, "c1", 10, 1)
	ts.Settled("c1")
	ts.awaitEmptyTrash(t)

	ts.recordDataset(t, "c2", 10, 2)
	ts.recordDataset(t, "c3", 10, 3)
	ts.Settled("c2") // evicts c1
	if ts.Get("c1") != nil {
		t.Fatal("c1 not evicted")
	}
	if wait := ts.emptyTrash(); wait <= 0 || wait > maxDeferral {
		t.Fatalf("emptying the trash while c3 is being protected: wait %v, want (0, %v]", wait, maxDeferral)
	}
	if got := ts.trashEntries(t); len(got) != 1 {
		t.Fatalf("trash holds %v while c3 is being protected, want c1's directory", got)
	}

	ts.Settled("c3") // evicts c2
	ts.awaitEmptyTrash(t)
}

// TestDeletesGoAheadShortOfSpace: deletes do not wait when the cache's file
// system could not take another dataset as large as the largest it holds.
func TestDeletesGoAheadShortOfSpace(t *testing.T) {
	ts := newTestStore(t, Rules{}, 1)
	ts.recordDataset(t, "c1", 10, 1)
	ts.recordDataset(t, "c2", 1<<42, 2) // 4 TiB apparent: more than the disk has free
	ts.recordDataset(t, "c3", 10, 3)
	ts.Settled("c2") // evicts c1, while c3 is being protected
	if ts.Get("c1") != nil {
		t.Fatal("c1 not evicted")
	}
	ts.mustEmptyAtOnce(t)
}

// TestDeletesWaitAtMostMaxDeferral: a dataset whose redundancy never
// settles holds deletes back no longer than maxDeferral.
func TestDeletesWaitAtMostMaxDeferral(t *testing.T) {
	ts := newTestStore(t, Rules{}, 1)
	ts.recordDataset(t, "c1", 10, 1)
	ts.recordDataset(t, "c2", 10, 2)
	d := ts.Get("c2")
	d.mu.Lock()
	d.settleBy = time.Now().Add(-time.Second)
	d.mu.Unlock()
	ts.mustEmptyAtOnce(t)
}

// TestRecordOfProtectedDatasetDoesNotDefer: a record read back for a
// dataset already protected (a restart) starts no redundancy, so the
// dataset it evicts is deleted at once.
func TestRecordOfProtectedDatasetDoesNotDefer(t *testing.T) {
	ts := newTestStore(t, Rules{}, 1)
	ts.recordDataset(t, "c1", 10, 1)
	ts.Settled("c1")
	ts.completeDataset(t, "c2", 10)
	must(t, ts.SetState("c2", Protected, ""))
	must(t, ts.SetRecord("c2", 2, time.Now())) // evicts c1
	ts.mustEmptyAtOnce(t)
}

// TestDeletesGoAheadWhenSpaceRunsShort: deletes that wait go ahead once
// the cache runs short of space meanwhile (a new dataset being written
// grew larger than what is free), without anything waking the emptier.
func TestDeletesGoAheadWhenSpaceRunsShort(t *testing.T) {
	passes := make(chan time.Duration, 100)
	ts := newTestStore(t, Rules{}, 1, func(o *Options) { o.emptied = func(w time.Duration) { passes <- w } })
	ts.recordDataset(t, "c1", 10, 1)
	ts.recordDataset(t, "c2", 10, 2)
	ts.recordDataset(t, "c3", 10, 3)
	ts.Settled("c2") // evicts c1; c3 not settled
	// The emptier waits for c3.
	awaitPass(t, passes, func(w time.Duration) bool { return w > 0 })
	if got := ts.trashEntries(t); len(got) != 1 {
		t.Fatalf("trash holds %v while c3 is being protected, want c1's directory", got)
	}
	d, _, err := ts.Obtain(Route{Name: "c4", Kind: KindDir, Root: "c4"})
	must(t, err)
	must(t, d.OpenWrite())
	d.CloseWrite("f", 1<<42, true) // counted as 4 TiB: more than the disk has free
	awaitPass(t, passes, func(w time.Duration) bool { return w == 0 })
	if len(ts.trashEntries(t)) != 0 {
		t.Fatalf("the emptier stopped waiting, yet the trash holds %v", ts.trashEntries(t))
	}
}

// awaitPass waits for a pass of the emptier that ok accepts.
func awaitPass(t *testing.T, passes <-chan time.Duration, ok func(wait time.Duration) bool) {
	t.Helper()
	timeout := time.After(spaceCheck + 10*time.Second)
	for {
		select {
		case w := <-passes:
			if ok(w) {
				return
			}
		case <-timeout:
			t.Fatal("no such pass of the emptier")
		}
	}
}
