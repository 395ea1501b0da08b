package prefix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/atomicfile"
	"golang.org/x/sys/unix"
)

func TestReadIndexMissing(t *testing.T) {
	ix, err := dirReadIndex(filepath.Join(fastDir(t), "never-flushed"))
	must(t, err)
	if ix.Version != FormatVersion || len(ix.Datasets) != 0 || ix.Current != "" {
		t.Errorf("missing index read as %+v", ix)
	}
	if _, ok := ix.Newest(nil); ok {
		t.Error("empty index has a newest dataset")
	}
}

func TestIndexRoundTrip(t *testing.T) {
	prefix := fastDir(t)
	at := time.Date(2024, 5, 1, 0, 0, 0, 5, time.UTC)
	must(t, dirUpdateIndex(context.Background(), prefix, nil, func(ix *Index) error {
		must(t, ix.Put(IndexEntry{Name: "ckpt.2", ID: 2, State: StateComplete, Nodes: 4, Files: 8, Bytes: 1 << 40, Flushed: at}))
		must(t, ix.Put(IndexEntry{Name: "ckpt.1", ID: 1, State: StateFlushing, Started: at}))
		must(t, ix.SetCurrent("ckpt.2"))
		return ix.AddFetchFailure("ckpt.2", FetchFailure{Time: at, Node: 3, Reason: strings.Repeat("x", 5000)})
	}))
	ix, err := dirReadIndex(prefix)
	must(t, err)
	if ix.Current != "ckpt.2" || len(ix.Datasets) != 2 || ix.Datasets[0].Name != "ckpt.1" {
		t.Fatalf("read back %+v", ix)
	}
	e := ix.Datasets[1]
	if e.Bytes != 1<<40 || !e.Flushed.Equal(at) || len(e.FailedFetches) != 1 ||
		len(e.FailedFetches[0].Reason) != maxReasonLen || ix.MaxID() != 2 {
		t.Errorf("entry read back as %+v", e)
	}
	if err := ix.SetCurrent("ckpt.1"); !errors.Is(err, ErrNotComplete) {
		t.Errorf("current on a flushing dataset: %v", err)
	}
	// The user's choice clears the failed fetches: Newest offers it again.
	if _, ok := ix.Newest(nil); ok {
		t.Error("Newest offers a dataset that failed a fetch")
	}
	must(t, ix.SetCurrent("ckpt.2"))
	if e, ok := ix.Newest(nil); !ok || e.Name != "ckpt.2" || len(e.FailedFetches) != 0 {
		t.Errorf("after SetCurrent, Newest offers %+v, %v; want ckpt.2 without failed fetches", e, ok)
	}
	if !ix.Remove("ckpt.2") || ix.Current != "" || ix.Remove("ckpt.2") {
		t.Error("Remove did not drop the dataset and the current mark")
	}
}

// TestUpdateIndexConcurrent: many goroutines (each with its own lock file
// descriptor, as separate processes would have) add to the index at once;
// none of their updates is lost.
func TestUpdateIndexConcurrent(t *testing.T) {
	prefix := fastDir(t)
	const workers, each = 8, 5
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				err := dirUpdateIndex(context.Background(), prefix, nil, func(ix *Index) error {
					// Read-modify-write of a shared counter too: the
					// classic lost-update shape.
					c, _ := ix.Lookup("counter")
					c.Name, c.State, c.Files = "counter", StateFlushing, c.Files+1
					if err := ix.Put(c); err != nil {
						return err
					}
					return ix.Put(IndexEntry{Name: fmt.Sprintf("w%d.%d", w, i), State: StateFlushing})
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	ix, err := dirReadIndex(prefix)
	must(t, err)
	c, _ := ix.Lookup("counter")
	if len(ix.Datasets) != workers*each+1 || c.Files != workers*each {
		t.Errorf("%d datasets and counter %d, want %d and %d", len(ix.Datasets), c.Files, workers*each+1, workers*each)
	}
}

// TestIndexCrashLeftovers: an index being written when its writer died is
// a temporary file; readers ignore it and the next update removes it.
func TestIndexCrashLeftovers(t *testing.T) {
	prefix := fastDir(t)
	must(t, dirUpdateIndex(context.Background(), prefix, nil, func(ix *Index) error {
		return ix.Put(IndexEntry{Name: "ckpt.1", ID: 1, State: StateComplete, Nodes: 1})
	}))
	stale := filepath.Join(filepath.Dir(indexPath(prefix)), atomicfile.TempPrefix(filepath.Base(indexPath(prefix)))+"crashed")
	must(t, os.WriteFile(stale, []byte(`{"version":1,"datasets":[{"name":"ckpt.2","state":"compl`), 0o644))
	ix, err := dirReadIndex(prefix)
	must(t, err)
	if len(ix.Datasets) != 1 {
		t.Errorf("read %+v", ix)
	}
	must(t, dirUpdateIndex(context.Background(), prefix, nil, func(ix *Index) error { return nil }))
	if _, err := os.Stat(stale); err == nil {
		t.Error("stale temporary index not removed")
	}
}

func TestUpdateIndexNoWriteOnError(t *testing.T) {
	prefix := fastDir(t)
	boom := errors.New("boom")
	if err := dirUpdateIndex(context.Background(), prefix, nil, func(ix *Index) error {
		ix.Put(IndexEntry{Name: "x", State: StateFlushing})
		return boom
	}); !errors.Is(err, boom) {
		t.Errorf("got %v", err)
	}
	if err := dirUpdateIndex(context.Background(), prefix, nil, func(ix *Index) error {
		ix.Datasets = append(ix.Datasets, IndexEntry{Name: "bad/name", State: StateFlushing})
		return nil
	}); err == nil || !strings.Contains(err.Error(), "invalid index") {
		t.Errorf("invalid result: %v", err)
	}
	if _, err := os.Stat(indexPath(prefix)); err == nil {
		t.Error("index written after failed updates")
	}
}

// TestIndexCorruptKept: a corrupt index is reported with its path and never
// overwritten.
func TestIndexCorruptKept(t *testing.T) {
	prefix := fastDir(t)
	must(t, os.MkdirAll(filepath.Join(prefix, ".scrfs"), 0o755))
	bad := []byte(`{"version":1,"datasets":[{"name":"a","state":"complete","nodes":1}`)
	must(t, os.WriteFile(indexPath(prefix), bad, 0o644))
	_, err := dirReadIndex(prefix)
	if !errors.Is(err, ErrBadMetadata) || !strings.Contains(err.Error(), indexPath(prefix)) {
		t.Errorf("ReadIndex: %v", err)
	}
	err = dirUpdateIndex(context.Background(), prefix, nil, func(ix *Index) error { return nil })
	if !errors.Is(err, ErrBadMetadata) {
		t.Errorf("UpdateIndex: %v", err)
	}
	if got, _ := os.ReadFile(indexPath(prefix)); string(got) != string(bad) {
		t.Error("corrupt index overwritten")
	}
}

// TestUpdateIndexWaitsForLock: another holder of the lock makes UpdateIndex
// wait, until ctx ends; once released, the update goes through.
func TestUpdateIndexWaitsForLock(t *testing.T) {
	prefix := fastDir(t)
	must(t, os.MkdirAll(filepath.Join(prefix, ".scrfs"), 0o755))
	f, err := os.OpenFile(filepath.Join(prefix, ".scrfs", "index.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	defer f.Close()
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_EX))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = dirUpdateIndex(ctx, prefix, nil, func(ix *Index) error {
		t.Error("ran without the lock")
		return nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "index.lock") {
		t.Errorf("got %v", err)
	}
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_UN))
	must(t, dirUpdateIndex(context.Background(), prefix, nil, func(ix *Index) error { return nil }))
}

// TestUpdateIndexWithoutFlock: a file system without flock gets a warning
// and an unlocked (still atomic) update.
func TestUpdateIndexWithoutFlock(t *testing.T) {
	for _, errno := range []error{unix.ENOLCK, unix.ENOTSUP} {
		prefix := fastDir(t)
		lg, logs := newTestLogger(t, true)
		noLocks := func(int, int) error { return errno }
		must(t, dirUpdateIndexFlock(context.Background(), prefix, lg, func(ix *Index) error {
			return ix.Put(IndexEntry{Name: "ckpt.1", State: StateFlushing})
		}, noLocks))
		if !strings.Contains(logs.all(), "does not support flock") {
			t.Errorf("%v: no warning; logs: %s", errno, logs.all())
		}
		ix, err := dirReadIndex(prefix)
		must(t, err)
		if _, ok := ix.Lookup("ckpt.1"); !ok {
			t.Errorf("%v: update lost", errno)
		}
	}
}

func TestNewest(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(1e9+s), 0) }
	base := []IndexEntry{
		{Name: "ckpt.10", ID: 10, State: StateComplete, Nodes: 4, Flushed: at(10)},
		{Name: "ckpt.20", ID: 20, State: StateComplete, Nodes: 4, Flushed: at(20)},
		{Name: "ckpt.30", ID: 30, State: StateComplete, Nodes: 2, Flushed: at(30),
			FailedFetches: []FetchFailure{{Node: 1, Reason: "corrupt"}}},
		{Name: "ckpt.40", ID: 40, State: StateComplete, Nodes: 4, Flushed: at(35)},
		{Name: "ckpt.50", ID: 50, State: StateFlushing, Nodes: 4},
		// Flushed after ckpt.40 but older: ID decides.
		{Name: "ckpt.15", ID: 15, State: StateComplete, Nodes: 4, Flushed: at(99)},
	}
	fourNodes := func(e IndexEntry) bool { return e.Nodes == 4 }
	for _, tc := range []struct {
		name    string
		current string
		usable  func(IndexEntry) bool
		want    string
	}{
		{"newest complete without failures", "", nil, "ckpt.40"},
		{"current wins over newer", "ckpt.20", nil, "ckpt.20"},
		{"current unusable falls back to older", "ckpt.20", func(e IndexEntry) bool { return e.Name != "ckpt.20" }, "ckpt.15"},
		{"failed current falls back to older", "ckpt.30", nil, "ckpt.20"},
		{"usable filter", "", func(e IndexEntry) bool { return fourNodes(e) && e.ID < 40 }, "ckpt.20"},
		{"nothing usable", "", func(IndexEntry) bool { return false }, ""},
	} {
		ix := emptyIndex()
		for _, e := range base {
			e.Trust = Verified
			must(t, ix.Put(e))
		}
		ix.Current = tc.current
		got, ok := ix.Newest(tc.usable)
		if got.Name != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: Newest = %q, %v; want %q", tc.name, got.Name, ok, tc.want)
		}
	}
}
