package transfer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/transfer"
)

// TestFlushOfDatasetNodeZeroLacks: node 0's "not found" reaches the node
// that asked as cache.ErrNotFound, so the CLI reports it as such.
func TestFlushOfDatasetNodeZeroLacks(t *testing.T) {
	f := newFixture(t, 2, memnet.Faults{})
	f.startAll()
	f.write("only-here", 10)
	if err := f.Nodes[0].Store.Drop("only-here", "the test takes it from node 0"); err != nil {
		t.Fatal(err)
	}
	_, err := f.fl(1).Request(context.Background(), "only-here", false)
	if !errors.Is(err, cache.ErrNotFound) || !strings.Contains(err.Error(), "node 0") {
		t.Fatalf("flush of a dataset node 0 lacks: %v", err)
	}
}

// TestFlushWithNodeDown fails the round naming the node, and touches
// nothing in the prefix's index.
func TestFlushWithNodeDown(t *testing.T) {
	f := newFixture(t, 3, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 10<<10)
	f.Kill(2)
	f.flush(0, "ckpt.1")
	f.Wait(wait, "flush failed on nodes 0 and 1", func() string { return f.describeFlush("ckpt.1") }, func() bool {
		return f.flushState(0, "ckpt.1") == cache.FlushFailed && f.flushState(1, "ckpt.1") == cache.FlushFailed
	})
	if e := f.Nodes[1].Store.Get("ckpt.1").Info().Flush.Error; !strings.Contains(e, "node 2") {
		t.Errorf("failure names %q", e)
	}
	if e, ok := f.index("ckpt.1"); ok {
		t.Errorf("index lists %+v after a round that never began", e)
	}
}

// TestFlushEvery flushes every second dataset that settles, by itself.
func TestFlushEvery(t *testing.T) {
	f := newFixture(t, 2, memnet.Faults{})
	f.Cfg.Options.Every = 2
	f.startAll()
	f.write("ckpt.1", 1<<10)
	f.write("ckpt.2", 1<<10)
	f.waitFlush("ckpt.2", cache.FlushDone)
	if st := f.flushState(0, "ckpt.1"); st != "" {
		t.Errorf("ckpt.1 flush state %q, want none", st)
	}
}

// TestFlushEveryNewestSettled: the second dataset settles before the
// first (the first's protect is held up); flush.every = 2 flushes the
// newest settled dataset, ckpt.2, not ckpt.1, whose settle came second.
func TestFlushEveryNewestSettled(t *testing.T) {
	var held atomic.Bool
	f := newFixture(t, 2, memnet.Faults{Delay: func(from, to int, kind string) time.Duration {
		// The first readiness call is ckpt.1's protect's: ckpt.1 was
		// recorded before ckpt.2 was written.
		if jobnet.RequestKind(kind) == "redundancy.ready" && held.CompareAndSwap(false, true) {
			return time.Second
		}
		return 0
	}})
	f.Cfg.Scheme, f.Cfg.SetSize = layout.Scheme{Kind: layout.KindPartner, Replicas: 1}, 2
	f.Cfg.Options.Every = 2
	f.startAll()
	f.write("ckpt.1", 1<<10)
	f.write("ckpt.2", 1<<10)
	f.waitFlush("ckpt.2", cache.FlushDone)
	if !held.Load() {
		t.Fatal("no protect call was held up: the test did not make ckpt.2 settle first")
	}
	if st := f.flushState(0, "ckpt.1"); st != "" {
		t.Errorf("ckpt.1 flush state %q, want none", st)
	}
}

// TestFlushOutcomeLost: every announcement of the outcome is lost; the
// nodes ask node 0 once their round went quiet, and learn it.
func TestFlushOutcomeLost(t *testing.T) {
	f := newFixture(t, 3, memnet.Faults{Call: func(from, to int, kind string) memnet.Drop {
		if jobnet.RequestKind(kind) == "transfer.flush-done" {
			return memnet.DropRequest
		}
		return memnet.Deliver
	}})
	f.Cfg.Options.RoundCheck = 200 * time.Millisecond
	f.startAll()
	f.write("ckpt.1", 10<<10)
	f.flush(1, "ckpt.1")
	f.waitFlush("ckpt.1", cache.FlushDone)
}

// TestFetchReplacesWhatCannotBeRestored: one node restarts with its cache,
// the others wiped (under SINGLE their shares are gone): the caches cannot
// restore ckpt.1, the prefix can, so the job fetches it; node 1's copy
// gives way to the verified one, and every node holds its share (issue
// 26: the newest intact checkpoint, wherever it is; before, nothing was
// fetched and the job restarted from nothing on two nodes).
func TestFetchReplacesWhatCannotBeRestored(t *testing.T) {
	f := newFixture(t, 3, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 10<<10)
	f.flush(0, "ckpt.1")
	f.waitFlush("ckpt.1", cache.FlushDone)
	for i := range f.Nodes {
		f.Kill(i)
		if i != 1 {
			f.Wipe(i)
		}
	}
	f.startAll()
	f.Wait(wait, "ckpt.1 recorded again everywhere", func() string { return f.Describe("ckpt.1") }, func() bool {
		for _, n := range f.Nodes {
			if ds := n.Store.Get("ckpt.1"); ds == nil || ds.Info().Seq == 0 {
				return false
			}
		}
		return true
	})
	f.checkFiles("ckpt.1")
	if r := f.fl(0).Restored(); r == nil || r.Dataset != "ckpt.1" || r.From != transfer.FromPrefix {
		t.Errorf("node 0 restored %+v, want ckpt.1 from the prefix", r)
	}
}

// TestFreshJobFetchesNothing: an empty prefix is a first start, not an
// error, and nobody waits for anybody.
func TestFreshJobFetchesNothing(t *testing.T) {
	f := newFixture(t, 3, memnet.Faults{})
	start := time.Now()
	f.startAll()
	if d := time.Since(start); d > f.Cfg.Options.ConnectTimeout {
		t.Errorf("a fresh start took %v", d)
	}
}

// TestPeerNamesChecked: no flush or fetch request with a made-up dataset
// name or route gets as far as a path.
func TestPeerNamesChecked(t *testing.T) {
	f := newFixture(t, 2, memnet.Faults{})
	f.startAll()
	for kind, req := range map[string]any{
		"transfer.flush":         map[string]any{"dataset": "../x", "round": "r"},
		"transfer.flush-prepare": map[string]any{"dataset": "a/b", "round": "r"},
		"transfer.fetch":         map[string]any{"dataset": "ckpt.1", "round": "r", "kind": "flat", "root": "../../etc"},
		"transfer.flush-done":    map[string]any{"dataset": ""},
	} {
		if answer := f.Forge(0, 1, kind, req); !strings.Contains(answer, "bad "+kind+" request") {
			t.Errorf("%s with a made-up name: %s", kind, answer)
		}
	}
}

// TestFetchOnAnotherNodeCount: a checkpoint three nodes flushed is fetched
// by a job of two (node 0 takes the parts of nodes 0 and 2) and by a job
// of five (nodes 3 and 4 take nothing); every node of the new job reads
// every file, byte-identical, through its namespace, and the dataset is
// recorded in the new job's layout.
func TestFetchOnAnotherNodeCount(t *testing.T) {
	f := newFixture(t, 3, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 80<<10)
	f.flush(0, "ckpt.1")
	f.waitFlush("ckpt.1", cache.FlushDone)
	want := map[string]string{}
	for i := range f.Nodes {
		for p, s := range f.written["ckpt.1"][i] {
			want[p] = s
		}
	}
	for _, nodes := range []int{2, 5} {
		t.Run("", func(t *testing.T) {
			g := newFixtureAt(t, nodes, memnet.Faults{}, f.prefix)
			g.startAll()
			g.Wait(wait, "ckpt.1 recorded again on every node", func() string { return g.Describe("ckpt.1") }, func() bool {
				for _, n := range g.Nodes {
					if ds := n.Store.Get("ckpt.1"); ds == nil || ds.Info().Seq == 0 {
						return false
					}
					if v := n.Protocols.Namespace.View("ckpt.1"); v == nil || v.Rev != 1 {
						return false
					}
				}
				return true
			})
			for _, n := range g.Nodes {
				v := n.Protocols.Namespace.View("ckpt.1")
				for p, s := range want {
					e, ok := v.Lookup(p)
					if !ok {
						t.Fatalf("node %d of %d does not show %s", n.Index, nodes, p)
					}
					b, err := g.ReadFile(context.Background(), n.Index, "ckpt.1", e, 1<<20)
					if err != nil || sha(b) != s {
						t.Fatalf("node %d of %d: %s differs (%v)", n.Index, nodes, p, err)
					}
				}
			}
		})
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
