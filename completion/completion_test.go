package completion_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/node"
	"github.com/scrfs/scrfs/node/nodetest"
	"github.com/scrfs/scrfs/record"
)

// node/nodetest has no tests of its own: the tests that run whole jobs on
// it check its goroutines too, and those of the nodes and stores it opens.
func TestMain(m *testing.M) {
	testutil.LeakCheckMain(m, "scrfs/completion.", "scrfs/node.", "scrfs/node/nodetest.", "scrfs/cache.")
}

const wait = 20 * time.Second // bound of every wait: far above what a test needs

// job is four nodes under xor, one set, as the reproductions run.
func job(t *testing.T, cacheSize int) *nodetest.Job {
	return nodetest.New(t, 4, memnet.Faults{}, nodetest.Config{
		Scheme: layout.Scheme{Kind: layout.KindXOR}, SetSize: 4, CacheSize: cacheSize,
		Options: node.Options{Timeout: time.Second, ConnectTimeout: time.Second, MemberTimeout: time.Second},
	})
}

// writeAll has every node but those in skip (which do not even create it)
// write one file of dataset name.
func writeAll(j *nodetest.Job, name string, skip ...int) {
	for _, n := range j.Nodes {
		if !contains(skip, n.Index) {
			n.Write(name, map[string][]byte{"rank_" + itoa(n.Index) + ".bin": []byte(name + " from node " + itoa(n.Index))})
		}
	}
}

// protectAll writes each dataset on every node, completes it from node
// from and waits until every node holds it protected.
func protectAll(t *testing.T, j *nodetest.Job, from int, names ...string) {
	t.Helper()
	for _, name := range names {
		writeAll(j, name)
		complete(t, j, from, name)
		j.WaitState(wait, name, cache.Protected, j.All()...)
	}
}

func complete(t *testing.T, j *nodetest.Job, from int, name string) {
	t.Helper()
	if err := j.Nodes[from].Protocols.Complete.Complete(context.Background(), name); err != nil {
		t.Fatalf("complete %s from node %d: %v", name, from, err)
	}
}

// recordOf returns node i's record of dataset name.
func recordOf(t *testing.T, j *nodetest.Job, i int, name string) *record.Record {
	t.Helper()
	ds := j.Nodes[i].Store.Get(name)
	if ds == nil {
		t.Fatalf("node %d does not hold %s", i, name)
	}
	rec, err := record.Load(ds.Dir())
	if err != nil {
		t.Fatalf("node %d: record of %s: %v", i, name, err)
	}
	return rec
}

// TestRecordAgreed: every node holds the same record, with every member's
// identity and share, the scheme, and the next sequence number.
func TestRecordAgreed(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	writeAll(j, "ckpt.1", 2)
	complete(t, j, 3, "ckpt.1")
	j.WaitState(wait, "ckpt.1", cache.Protected, j.All()...)
	writeAll(j, "ckpt.2")
	complete(t, j, 1, "ckpt.2")
	j.WaitState(wait, "ckpt.2", cache.Protected, j.All()...)
	first := recordOf(t, j, 0, "ckpt.1")
	for i := range j.Nodes {
		rec := recordOf(t, j, i, "ckpt.1")
		if rec.Seq != first.Seq || rec.Completed != first.Completed || len(rec.Members) != 4 {
			t.Errorf("node %d's record %+v differs from node 0's", i, rec)
		}
		m := rec.Members[i]
		if m.ID != j.Nodes[i].Store.NodeID() || m.Node != i || m.Rank != i {
			t.Errorf("member %d: %+v, node identity %s", i, m, j.Nodes[i].Store.NodeID())
		}
		// Node 2 wrote nothing, but shows the directory node 3 started.
		if regular := regularFiles(&m); (i == 2) != (regular == 0) {
			t.Errorf("member %d: %d regular files", i, regular)
		}
	}
	if rec := recordOf(t, j, 2, "ckpt.2"); rec.Seq != first.Seq+1 || rec.Scheme.Kind != "xor" {
		t.Errorf("ckpt.2's record: seq %d after %d, scheme %+v", rec.Seq, first.Seq, rec.Scheme)
	}
}

// TestPartialCheckpointFails is issue 12's second reproduction: a node is
// killed after writing its share but before completion, and restarted with
// its cache or wiped; the dataset fails everywhere with the reason — at
// once, when the node joins (issue 26: no completion rule may ever fire,
// the ranks that would write the marker being gone), and `scrfs complete`
// then says it failed.
func TestPartialCheckpointFails(t *testing.T) {
	for _, wipe := range []bool{false, true} {
		t.Run(map[bool]string{false: "cache kept", true: "wiped"}[wipe], func(t *testing.T) {
			j := job(t, 8)
			j.RestartAll()
			writeAll(j, "ckpt.1")
			j.Kill(3)
			if wipe {
				j.Wipe(3)
			}
			<-j.Restart(3)
			j.WaitState(wait, "ckpt.1", cache.Failed, j.All()...)
			if err := j.Nodes[0].Protocols.Complete.Complete(context.Background(), "ckpt.1"); err == nil || !strings.Contains(err.Error(), "ckpt.1 failed") {
				t.Errorf("complete ckpt.1 after it failed: %v, want it said", err)
			}
			_, why := j.Nodes[0].State("ckpt.1")
			want := map[bool]string{false: "node 3 lost its copy: its daemon restarted", true: "node 3 lost its copy: it restarted with an empty cache"}[wipe]
			if !strings.Contains(why, want) {
				t.Errorf("failed because %q, want it to say %q", why, want)
			}
		})
	}
}

// TestRestartedBeforeToldFails (found by the chaos test): node 1 is down
// when node 0 begins ckpt.1, so it cannot be told; its daemon restarts,
// with its cache or wiped, and hears of ckpt.1 in the background (or not
// before the completion). Whatever it then holds, its new run cannot vouch
// for what the application gave the run it replaced: ckpt.1 fails.
func TestRestartedBeforeToldFails(t *testing.T) {
	for _, wipe := range []bool{false, true} {
		t.Run(map[bool]string{false: "cache kept", true: "wiped"}[wipe], func(t *testing.T) {
			j := job(t, 8)
			j.RestartAll()
			j.Kill(1)
			if wipe {
				j.Wipe(1)
			}
			writeAll(j, "ckpt.1", 1) // node 0 begins it first, and goes on without node 1
			<-j.Restart(1)
			// It fails as node 1 joins, or when completed: either way.
			j.Nodes[0].Protocols.Complete.Complete(context.Background(), "ckpt.1")
			j.WaitState(wait, "ckpt.1", cache.Failed, 0, 2, 3)
			if _, why := j.Nodes[0].State("ckpt.1"); !strings.Contains(why, "node 1: it could not be told") {
				t.Errorf("failed because %q, want node 1's restart named", why)
			}
		})
	}
}

// TestWroteNothingVouched: a node up since before the dataset began, that
// wrote nothing, takes part with an empty share; a replacement of it
// cannot vouch for its former self.
func TestWroteNothingVouched(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	writeAll(j, "ckpt.1", 1)
	complete(t, j, 0, "ckpt.1")
	j.WaitState(wait, "ckpt.1", cache.Protected, j.All()...)
	if m := recordOf(t, j, 0, "ckpt.1").Members[1]; regularFiles(&m) != 0 {
		t.Fatalf("node 1's share %+v, want no files", m)
	}
	writeAll(j, "ckpt.2", 1)
	j.Kill(1)
	j.Wipe(1)
	<-j.Restart(1)
	j.WaitState(wait, "ckpt.2", cache.Failed, 0, 2, 3)
}

// TestEvictionFollowsRecords is issue 12's first reproduction: a rebuilt
// node adopts its datasets in rebuild order (newest first), yet evicts the
// same, oldest, checkpoint as every other node, by the record's sequence.
func TestEvictionFollowsRecords(t *testing.T) {
	j := job(t, 2)
	j.RestartAll()
	protectAll(t, j, 0, "ckpt.1", "ckpt.2")
	j.Kill(2)
	j.Wipe(2)
	<-j.Restart(2)
	j.WaitState(wait, "ckpt.1", cache.Protected, 2)
	j.WaitState(wait, "ckpt.2", cache.Protected, 2)
	writeAll(j, "ckpt.3")
	complete(t, j, 0, "ckpt.3")
	j.WaitState(wait, "ckpt.3", cache.Protected, j.All()...)
	j.Wait(wait, "ckpt.1 evicted everywhere", nil, func() bool {
		for _, n := range j.Nodes {
			if n.Store.Get("ckpt.1") != nil {
				return false
			}
		}
		return true
	})
	for _, n := range j.Nodes {
		if n.Store.Get("ckpt.2") == nil {
			t.Errorf("node %d evicted ckpt.2, the newer one", n.Index)
		}
	}
}

// TestFailedCheckpointEvictsNothing: a checkpoint that completes on some
// nodes and then fails job-wide (a node killed before completion) costs
// no proven checkpoint its place: every node keeps both older ones.
func TestFailedCheckpointEvictsNothing(t *testing.T) {
	j := job(t, 2)
	j.RestartAll()
	protectAll(t, j, 0, "ckpt.1", "ckpt.2")
	writeAll(j, "ckpt.3")
	j.Kill(3)
	<-j.Restart(3)
	j.WaitState(wait, "ckpt.3", cache.Failed, j.All()...)
	for _, name := range []string{"ckpt.1", "ckpt.2"} {
		for _, n := range j.Nodes {
			if st, why := n.State(name); st != cache.Protected {
				t.Errorf("node %d: %s is %q %s after ckpt.3 failed; want it kept, protected", n.Index, name, st, why)
			}
		}
	}
}

// TestCoordinatorRestartsMidRound: node 0 dies while a round waits for a
// node's open file; when it is back, the nodes' complete but unrecorded
// copies are proven from its ledger and recorded.
func TestCoordinatorRestartsMidRound(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	writeAll(j, "ckpt.1")
	ds := j.Nodes[2].Store.Get("ckpt.1")
	if err := ds.OpenWrite(); err != nil { // the application still writes on node 2
		t.Fatal(err)
	}
	complete(t, j, 1, "ckpt.1")
	j.WaitState(wait, "ckpt.1", cache.Complete, 0, 1, 3)
	j.Kill(0)
	ds.CloseWrite("late.bin", 0, false)
	j.WaitState(wait, "ckpt.1", cache.Complete, 2)
	<-j.Restart(0)
	j.WaitState(wait, "ckpt.1", cache.Protected, j.All()...)
}

// TestBeginAfterRecordRefused: a completed dataset cannot be started
// again on any node: it is read-only job-wide.
func TestBeginAfterRecordRefused(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	writeAll(j, "ckpt.1", 3)
	complete(t, j, 0, "ckpt.1")
	j.WaitState(wait, "ckpt.1", cache.Protected, j.All()...)
	j.Kill(3)
	j.Wipe(3)
	j.Start(3)
	_, err := j.Nodes[3].Begin("ckpt.1")
	if !errors.Is(err, cache.ErrReadOnly) {
		t.Fatalf("starting a recorded dataset again: %v, want read-only", err)
	}
}

// regularFiles counts the files a member's share lists.
func regularFiles(m *record.Member) int {
	n := 0
	for _, f := range m.Files {
		if f.Type == files.Regular {
			n++
		}
	}
	return n
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestDatasetDirectoriesJobWide: a dataset one node starts exists on every
// node by the time the starter's create returns, so an application whose
// rank 0 makes the checkpoint directory finds it on every node.
func TestDatasetDirectoriesJobWide(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	if _, err := j.Nodes[2].Begin("dcp_200"); err != nil {
		t.Fatal(err)
	}
	for _, n := range j.Nodes {
		if st, _ := n.State("dcp_200"); st != cache.Writing {
			t.Errorf("node %d: dcp_200 is %q right after node 2 started it", n.Index, st)
		}
	}
	// The ranks write into it on their own nodes; it completes with
	// everyone's files.
	writeAll(j, "dcp_200")
	complete(t, j, 0, "dcp_200")
	j.WaitState(wait, "dcp_200", cache.Protected, j.All()...)
}

// TestRenameJobWide: a dataset renamed into place on one node (ckpt.tmp →
// ckpt.100) is renamed on every node, and completes under its new name
// with every node's files.
func TestRenameJobWide(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	writeAll(j, "ckpt.tmp")
	if err := j.Nodes[1].Rename("ckpt.tmp", "ckpt.100"); err != nil {
		t.Fatal(err)
	}
	for _, n := range j.Nodes {
		if st, _ := n.State("ckpt.100"); st != cache.Writing || n.Store.Get("ckpt.tmp") != nil {
			t.Errorf("node %d after the rename: ckpt.100 %q, ckpt.tmp still there: %v", n.Index, st, n.Store.Get("ckpt.tmp") != nil)
		}
	}
	complete(t, j, 2, "ckpt.100")
	j.WaitState(wait, "ckpt.100", cache.Protected, j.All()...)
	if rec := recordOf(t, j, 3, "ckpt.100"); regularFiles(&rec.Members[0]) != 1 {
		t.Errorf("record after the rename: %+v", rec.Members[0])
	}
}

// TestNotToldThenRestarted (found by issue 26's chaos test): node 2 is
// down when a dataset begins, so telling it fails at once (connection
// refused), before the starter's wait is over; when its daemon starts
// again the dataset fails at once — its new run cannot vouch for what the
// old one held — rather than stay writing on the others until a
// completion rule fires (the marker's name may be node 2's to keep, which
// its new run cannot speak for).
func TestNotToldThenRestarted(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	j.Kill(2)
	writeAll(j, "ckpt.1", 2)
	<-j.Restart(2)
	j.WaitState(wait, "ckpt.1", cache.Failed, 0, 1, 3)
	if _, why := j.Nodes[0].State("ckpt.1"); !strings.Contains(why, "node 2: it could not be told") {
		t.Errorf("failed because %q, want node 2's restart named", why)
	}
}
