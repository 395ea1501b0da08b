package transfer_test

import (
	"slices"
	"testing"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/flush"
	"github.com/scrfs/scrfs/jobnet/memnet"
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
	if e, ok := f.index("ckpt.1"); !ok || e.State != flush.StateComplete || e.Nodes != 3 {
		t.Fatalf("index entry %+v (found %v)", e, ok)
	}
	for i := range f.Nodes {
		f.Kill(i)
		f.Wipe(i)
	}
	f.startAll()
	f.WaitState(wait, "ckpt.1", cache.Complete, f.All()...)
	f.checkFiles("ckpt.1")
	for i := range f.Nodes {
		if !slices.Contains(f.fetched[i], "ckpt.1") {
			t.Errorf("node %d: fetched %v, not handed on to be protected", i, f.fetched[i])
		}
	}
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
	f.WaitState(wait, "ckpt.1", cache.Complete, f.All()...)
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
	f.per[2] = func(o *transfer.Options) { o.Async, o.Bandwidth = true, 256<<10 }
	f.startAll()
	f.write("ckpt.1", 512<<10)
	f.flush(1, "ckpt.1")
	f.Wait(wait, "node 2 flushing", nil, func() bool { return f.flushState(2, "ckpt.1") == cache.FlushRunning })
	f.Kill(0)
	<-f.start(0)
	f.waitFlush("ckpt.1", cache.FlushDone)
	if e, ok := f.index("ckpt.1"); !ok || e.State != flush.StateComplete {
		t.Fatalf("index entry %+v (found %v)", e, ok)
	}
}
