package completion_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/completion"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/node"
	"github.com/scrfs/scrfs/node/nodetest"
)

// Node 0 restarted, with its control directory or wiped, while datasets
// were in flight: the chaos test's findings. Every dataset in flight ends
// recorded or failed with a true reason; none waits forever.

// TestCoordinatorWipedMidWrite: node 0 is lost (wiped) while the nodes
// write; its replacement knows nothing of the dataset but learns of it
// from the others at its start, and fails it on every node (node 0 lost
// its share) at once, rather than leave it writing until a completion
// rule fires, which may never happen (issue 26); `scrfs complete` through
// node 0 then says it failed.
func TestCoordinatorWipedMidWrite(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	writeAll(j, "ckpt.1")
	j.Kill(0)
	j.Wipe(0)
	<-j.Restart(0)
	j.WaitState(wait, "ckpt.1", cache.Failed, j.All()...)
	if err := j.Nodes[0].Protocols.Complete.Complete(context.Background(), "ckpt.1"); err == nil || !strings.Contains(err.Error(), "ckpt.1 failed") {
		t.Errorf("complete ckpt.1 through node 0 after it failed: %v, want it said", err)
	}
	if _, why := j.Nodes[3].State("ckpt.1"); !strings.Contains(why, "node 0") {
		t.Errorf("ckpt.1 failed saying %q; want node 0 named", why)
	}
}

// TestCoordinatorRestartsWithoutItsCopy: node 0's ledger says ckpt.1
// began, but its restart finds no copy of it and nothing failed here: it
// was killed between agreeing the start and starting its own copy
// (TestChaos, rs). Its part is lost: it fails ckpt.1 on every node,
// rather than leave it writing for ever.
func TestCoordinatorRestartsWithoutItsCopy(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	writeAll(j, "ckpt.1")
	j.Kill(0)
	// Node 0's store as if it never started ckpt.1: its cache and the
	// store's state gone, the ledger kept.
	if err := os.RemoveAll(j.Nodes[0].CacheDir); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(j.Nodes[0].ControlDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "state.json" {
			err = os.Remove(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	<-j.Restart(0)
	j.WaitState(wait, "ckpt.1", cache.Failed, 1, 2, 3)
	if _, why := j.Nodes[2].State("ckpt.1"); !strings.Contains(why, "node 0 lost its copy") {
		t.Errorf("ckpt.1 failed saying %q; want node 0's restart named", why)
	}
}

// TestCoordinatorLostItsCopyMidRound: node 0 dies while a round waits for
// its own open file, after the others completed their copies; restarted,
// with its cache (its copy then failed, being written) or wiped, it learns
// of the others' complete, unrecorded copies and fails the dataset on
// every node, node 0 named.
func TestCoordinatorLostItsCopyMidRound(t *testing.T) {
	for _, wipe := range []bool{false, true} {
		t.Run(fmt.Sprintf("wiped=%v", wipe), func(t *testing.T) {
			j := job(t, 8)
			j.RestartAll()
			writeAll(j, "ckpt.1")
			if err := j.Nodes[0].Store.Get("ckpt.1").OpenWrite(); err != nil { // the application still writes on node 0
				t.Fatal(err)
			}
			complete(t, j, 1, "ckpt.1")
			j.WaitState(wait, "ckpt.1", cache.Complete, 1, 2, 3)
			j.Kill(0)
			if wipe {
				j.Wipe(0)
			}
			<-j.Restart(0)
			j.WaitState(wait, "ckpt.1", cache.Failed, 1, 2, 3)
			if _, why := j.Nodes[2].State("ckpt.1"); !strings.Contains(why, "node 0") {
				t.Errorf("ckpt.1 failed saying %q; want node 0 named", why)
			}
		})
	}
}

// TestSequenceAfterCoordinatorWiped: node 0 is replaced (wiped) after
// three checkpoints; the next ones are still the newest of the job — their
// sequence numbers go on after the others' — so each new one makes the
// oldest go, never the newest, on every node.
func TestSequenceAfterCoordinatorWiped(t *testing.T) {
	j := job(t, 2)
	j.RestartAll()
	protectAll(t, j, 1, "ckpt.1", "ckpt.2", "ckpt.3")
	j.Kill(0)
	j.Wipe(0)
	<-j.Restart(0)
	j.WaitState(wait, "ckpt.2", cache.Protected, 0)
	j.WaitState(wait, "ckpt.3", cache.Protected, 0)
	protectAll(t, j, 2, "ckpt.4", "ckpt.5")
	last := recordOf(t, j, 1, "ckpt.4").Seq
	for i := range j.Nodes {
		if seq := recordOf(t, j, i, "ckpt.5").Seq; seq <= last {
			t.Errorf("node %d: ckpt.5 has sequence %d, ckpt.4 %d", i, seq, last)
		}
	}
	j.Wait(wait, "ckpt.3 evicted everywhere, ckpt.4 and ckpt.5 kept", func() string {
		return j.Describe("ckpt.3") + " / " + j.Describe("ckpt.4") + " / " + j.Describe("ckpt.5")
	}, func() bool {
		for _, n := range j.Nodes {
			if n.Store.Get("ckpt.3") != nil || n.Store.Get("ckpt.4") == nil || n.Store.Get("ckpt.5") == nil {
				return false
			}
		}
		return true
	})
}

// TestRecordMissedThenRestarted: node 1 completes its copy, and is killed
// before the record reaches it; restarted with its cache, it gets the
// record when it joins (the round is asked for again and sends the
// job's record on, never judging it anew), so the stock-taking its start
// asks for finds every member's share and protects the dataset — it
// used to count node 1's share gone, and failed a dataset whose every
// byte was there.
func TestRecordMissedThenRestarted(t *testing.T) {
	var drop atomic.Bool
	drop.Store(true)
	j := nodetest.New(t, 4, memnet.Faults{Call: func(from, to int, kind string) memnet.Drop {
		if jobnet.RequestKind(kind) == "completion.record" && to == 1 && drop.Load() {
			return memnet.DropRequest
		}
		return memnet.Deliver
	}}, nodetest.Config{
		Scheme: layout.Scheme{Kind: layout.KindXOR}, SetSize: 4, CacheSize: 8,
		Options: node.Options{Timeout: time.Second, ConnectTimeout: time.Second, MemberTimeout: time.Second},
	})
	j.RestartAll()
	writeAll(j, "ckpt.1")
	want := map[int]map[string]string{}
	for _, n := range j.Nodes {
		want[n.Index] = n.Sums("ckpt.1")
	}
	complete(t, j, 2, "ckpt.1")
	j.WaitState(wait, "ckpt.1", cache.Degraded, 0, 2, 3) // node 1 never ready: no record
	j.WaitState(wait, "ckpt.1", cache.Complete, 1)
	j.Kill(1)
	drop.Store(false)
	<-j.Restart(1)
	j.WaitState(wait, "ckpt.1", cache.Protected, j.All()...)
	for _, n := range j.Nodes {
		if got := n.Sums("ckpt.1"); !maps.Equal(got, want[n.Index]) {
			t.Errorf("node %d holds %v of ckpt.1, wrote %v", n.Index, got, want[n.Index])
		}
	}
	// Node 1 protected it twice (the record's arrival, the stock-taking):
	// the earlier attempt, whose verdict went to the later one, gives up
	// after twice the timeout and a connect timeout without making the
	// dataset degraded.
	stays(t, j, 3*time.Second, "ckpt.1", cache.Protected)
}

// stays fails if dataset name leaves state st on any node within d: a
// bounded watch of the state itself.
func stays(t *testing.T, j *nodetest.Job, d time.Duration, name string, st cache.State) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for _, n := range j.Nodes {
			if got, why := n.State(name); got != st {
				t.Fatalf("node %d: %s went %s (%s)", n.Index, name, got, why)
			}
		}
		time.Sleep(20 * time.Millisecond) // a poll of the state
	}
}

// TestShareOfAKilledWriterBeforeRestore: node 2 is killed while the
// dataset is being written, and a round asks for its share after its
// daemon is up again but before its restore failed what was being
// written (the chaos test's finding: the round completed node 2's
// partial copy, and a checkpoint without rank 2's files was protected and
// flushed). Its share is lost, and the dataset fails everywhere.
func TestShareOfAKilledWriterBeforeRestore(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	writeAll(j, "ckpt.1")
	j.Kill(2)
	j.Start(2) // serving peers, not restored yet
	complete(t, j, 0, "ckpt.1")
	j.WaitState(wait, "ckpt.1", cache.Failed, 0, 1, 3)
	if _, why := j.Nodes[0].State("ckpt.1"); !strings.Contains(why, "node 2 lost its copy") {
		t.Errorf("ckpt.1 failed saying %q; want node 2's copy named lost", why)
	}
}

// TestCoordinatorRestartPromptWithPending: node 0 restarts holding a
// dataset complete but unrecorded (killed mid-round). Its own join waits
// for that dataset's round, which waits for node 0's recall of the other
// nodes: the recall must not wait for the join in turn (it did, until the
// connect timeout ended the join, and the job was out of step for that
// long). With a connect timeout far above the wait, the dataset is
// recorded and protected promptly.
func TestCoordinatorRestartPromptWithPending(t *testing.T) {
	j := nodetest.New(t, 4, memnet.Faults{}, nodetest.Config{
		Scheme: layout.Scheme{Kind: layout.KindXOR}, SetSize: 4, CacheSize: 8,
		Options: node.Options{Timeout: time.Second, ConnectTimeout: time.Minute, MemberTimeout: time.Second},
	})
	j.RestartAll()
	writeAll(j, "ckpt.1")
	ds := j.Nodes[2].Store.Get("ckpt.1")
	if err := ds.OpenWrite(); err != nil { // node 2's application still writes: the round waits
		t.Fatal(err)
	}
	complete(t, j, 1, "ckpt.1")
	j.WaitState(wait, "ckpt.1", cache.Complete, 0, 1, 3)
	j.Kill(0)
	ds.CloseWrite("late.bin", 0, false)
	start := time.Now()
	<-j.Restart(0)
	j.WaitState(wait, "ckpt.1", cache.Protected, j.All()...)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("node 0's restart with a pending dataset took %v", took)
	}
}

// TestBeginWithANodeDown: a node of the job is down when another starts a
// dataset. Node 0 tells the nodes that answer, and the start goes on
// without waiting for the silent one as long as the starter waits for
// node 0 (the chaos test's finding: the application's mkdir failed with
// EIO after cluster.connect_timeout whenever a node was down). The silent
// node shows the directory once it is back and the application writes
// there.
func TestBeginWithANodeDown(t *testing.T) {
	j := job(t, 8)
	j.RestartAll()
	j.Kill(2)
	if _, err := j.Nodes[1].Begin("ckpt.1"); err != nil {
		t.Fatalf("start a dataset with node 2 down: %v", err)
	}
	for _, i := range []int{0, 3} {
		if st, _ := j.Nodes[i].State("ckpt.1"); st != cache.Writing {
			t.Errorf("node %d: ckpt.1 is %q once the start returned", i, st)
		}
	}
}

// TestCoordinatorKilledAsItRecords: node 0 is killed once it agreed a
// checkpoint's record and kept it with its own copy, before it told any
// other node: before its ledger forgot when the checkpoint began ("kept":
// the chaos test's finding, where node 0's restart failed the checkpoint
// as being written by its earlier run, and the other nodes with it, while
// it held the record) and after ("forgotten": it used to fail as "node 0
// has no record of when ckpt.1 began"). Restarted, node 0 sends the
// record on: the checkpoint is protected everywhere under the record
// agreed, and numbers the next one after it.
func TestCoordinatorKilledAsItRecords(t *testing.T) {
	for _, point := range []string{"kept", "forgotten"} {
		t.Run(point, func(t *testing.T) {
			j := job(t, 8)
			j.RestartAll()
			protectAll(t, j, 0, "ckpt.0")
			writeAll(j, "ckpt.1")
			stopped := make(chan struct{})
			var once sync.Once
			completion.SetHook(func(ctx context.Context, at string) {
				if at == point {
					once.Do(func() {
						close(stopped)
						<-ctx.Done()
					})
				}
			})
			t.Cleanup(func() { completion.SetHook(nil) })
			complete(t, j, 2, "ckpt.1")
			<-stopped
			j.Kill(0)
			for _, n := range j.Nodes[1:] {
				if got, why := n.State("ckpt.1"); got != cache.Complete {
					t.Fatalf("node %d: ckpt.1 %s (%s) before node 0 told it the record", n.Index, got, why)
				}
			}
			<-j.Restart(0)
			j.WaitState(wait, "ckpt.1", cache.Protected, j.All()...)
			want := recordOf(t, j, 0, "ckpt.1")
			if want.Seq <= recordOf(t, j, 0, "ckpt.0").Seq {
				t.Fatalf("ckpt.1 recorded with seq %d, not after ckpt.0's", want.Seq)
			}
			for _, n := range j.Nodes[1:] {
				if got := recordOf(t, j, n.Index, "ckpt.1"); got.Seq != want.Seq || !got.Completed.Equal(want.Completed) {
					t.Errorf("node %d holds ckpt.1 as seq %d of %v, node 0 as seq %d of %v", n.Index, got.Seq, got.Completed, want.Seq, want.Completed)
				}
			}
			protectAll(t, j, 1, "ckpt.2")
			if got := recordOf(t, j, 3, "ckpt.2").Seq; got <= want.Seq {
				t.Fatalf("ckpt.2 recorded with seq %d, not after ckpt.1's %d", got, want.Seq)
			}
		})
	}
}
