package transfer_test

import (
	"context"

	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/node"
	"github.com/scrfs/scrfs/prefix"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/transfer"
)

// TestFlushAndFetch: a flush asked for on any node runs job-wide; after
// every cache is wiped, the job fetches it back byte for byte and hands it
// on to be protected again.
func TestFlushAndFetch(t *testing.T) {
	f := newFixture(t, 3, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 100<<10)
	f.flush(2, "ckpt.1")
	f.waitFlush("ckpt.1", cache.FlushDone)
	flushed, err := record.Load(f.Nodes[0].Store.Get("ckpt.1").Dir())
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := f.index("ckpt.1"); !ok || e.State != prefix.StateComplete || e.Nodes != 3 || e.ID != flushed.Seq {
		t.Fatalf("index entry %+v (found %v), record seq %d", e, ok, flushed.Seq)
	}
	for i := range f.Nodes {
		f.Kill(i)
		f.Wipe(i)
	}
	f.startAll()
	f.WaitState(wait, "ckpt.1", cache.Recorded, f.All()...)
	f.checkFiles("ckpt.1")
	// Fetched, it gets this job's record again: the same place in the
	// job's order, revised for this layout.
	f.Wait(wait, "ckpt.1 recorded again", func() string { return f.Describe("ckpt.1") }, func() bool {
		for _, n := range f.Nodes {
			rec, err := record.Load(n.Store.Get("ckpt.1").Dir())
			if err != nil || rec.Rev != 1 || rec.Seq != flushed.Seq {
				return false
			}
		}
		return true
	})
}

// TestFetchFallsBackOnCorruptPart: the newest dataset in the prefix has a
// corrupt file on one node; the fetch records the failure in the index and
// every node restarts from the older dataset instead.
func TestFetchFallsBackOnCorruptPart(t *testing.T) {
	f := newFixture(t, 3, memnet.Faults{})
	f.startAll()
	for _, name := range []string{"ckpt.1", "ckpt.2"} {
		f.write(name, 64<<10)
		f.flush(0, name)
		f.waitFlush(name, cache.FlushDone)
	}
	f.corrupt("ckpt.2", 1)
	for i := range f.Nodes {
		f.Kill(i)
		f.Wipe(i)
	}
	f.startAll()
	f.WaitState(wait, "ckpt.1", cache.Recorded, f.All()...)
	f.checkFiles("ckpt.1")
	for _, n := range f.Nodes {
		if st, _ := n.State("ckpt.2"); st != "" {
			t.Errorf("node %d holds the corrupt ckpt.2 (%s)", n.Index, st)
		}
	}
	e, _ := f.index("ckpt.2")
	if len(e.FailedFetches) != 1 || e.FailedFetches[0].Node != 1 {
		t.Fatalf("index records fetch failures %+v, want one on node 1", e.FailedFetches)
	}
}

// TestCoordinatorKilledMidFlush: node 0 dies while another node still
// writes its part; once node 0 is back the round is redone and ends, on
// every node — never left "flushing".
func TestCoordinatorKilledMidFlush(t *testing.T) {
	f := newFixture(t, 3, memnet.Faults{})
	// Node 2 copies slowly, so the round is still running when node 0 dies.
	f.Cfg.PerNode = func(i int, o *node.Options) {
		if i == 2 {
			o.Async, o.Bandwidth = true, 256<<10
		}
	}
	f.startAll()
	f.write("ckpt.1", 512<<10)
	f.flush(1, "ckpt.1")
	f.Wait(wait, "node 2 flushing", nil, func() bool { return f.flushState(2, "ckpt.1") == cache.FlushRunning })
	f.Kill(0)
	<-f.start(0)
	f.waitFlush("ckpt.1", cache.FlushDone)
	if e, ok := f.index("ckpt.1"); !ok || e.State != prefix.StateComplete {
		t.Fatalf("index entry %+v (found %v)", e, ok)
	}
}

// TestFlushNewestWaitsForCompletion: `scrfs flush` without a name, asked
// while the newest dataset's completion was requested but a file of it is
// still open for writing (the application renamed its marker into place
// and exited, its last release still on its way), flushes that dataset
// once it completes, not the one before.
func TestFlushNewestWaitsForCompletion(t *testing.T) {
	f := newFixture(t, 1, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 10<<10)
	st := f.Nodes[0].Store
	ds, _, err := st.Obtain(cache.Route{Name: "ckpt.2", Kind: cache.KindDir, Root: "ckpt.2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.OpenWrite(); err != nil {
		t.Fatal(err)
	}
	if err := st.RequestComplete("ckpt.2", "marker .metadata"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		rep, err := f.fl(0).Request(context.Background(), "", false)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- rep.Dataset
	}()
	// Nothing announces "waiting": give a flush that does not wait the
	// time to answer wrongly.
	select {
	case name := <-got:
		t.Fatalf("flush of the newest dataset answered %q while ckpt.2 was completing", name)
	case <-time.After(200 * time.Millisecond):
	}
	ds.CloseWrite("rank_0.bin", 0, false)
	if name := <-got; name != "ckpt.2" {
		t.Fatalf("flush of the newest dataset flushed %q, want ckpt.2", name)
	}
	f.waitFlush("ckpt.2", cache.FlushDone)
}

// TestDatasetProgress: `scrfs flush --wait` on any node follows the whole
// dataset, not that node's share: while the round runs, its bytes are
// every node's part together.
func TestDatasetProgress(t *testing.T) {
	f := newFixture(t, 3, memnet.Faults{})
	// 4 s of copying per node: a busy machine's polls (each asks every
	// node, within a second) still see the round under way.
	f.Cfg.PerNode = func(i int, o *node.Options) { o.Async, o.Bandwidth = true, 128<<10 }
	f.startAll()
	f.write("ckpt.1", 512<<10)
	rep := f.flush(1, "ckpt.1")
	var all int64
	for i := range f.Nodes {
		all += int64(512<<10 + i) // f.write's sizes
	}
	// Bytes copied are no store change (f.Wait would look only when a
	// state moves): poll.
	var seen transfer.Progress
	underWay := testutil.Poll(wait, func() bool {
		p, err := f.fl(1).DatasetProgress(context.Background(), "ckpt.1", rep.Round)
		if err != nil {
			t.Fatal(err)
		}
		seen = p
		return p.State == cache.FlushRunning && p.Total == all && p.Done > 0 && p.Done < p.Total
	})
	if !underWay {
		t.Fatalf("node 1 never reported the whole dataset's flush under way; last: %+v", seen)
	}
	if own, _ := f.fl(1).Progress("ckpt.1", rep.Round); own.Total >= seen.Total {
		t.Errorf("node 1's own share %d bytes, the dataset's %d", own.Total, seen.Total)
	}
	f.waitFlush("ckpt.1", cache.FlushDone)
}
