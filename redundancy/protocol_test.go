package redundancy_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/schemes"
)

// TestProtectAndRebuild protects a dataset under each scheme, loses one
// node with its cache, and rebuilds it byte for byte on the replacement.
func TestProtectAndRebuild(t *testing.T) {
	for _, p := range []schemes.Params{xor, rs2, partner} {
		t.Run(p.Kind.String(), func(t *testing.T) {
			f := newFixture(t, p, memnet.Faults{})
			f.startAll()
			f.write("ckpt.1", 200<<10)
			f.complete(1, "ckpt.1")
			f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)

			f.Kill(2)
			f.Wipe(2)
			<-f.restart(2)
			f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
			f.checkFiles("ckpt.1", f.All()...)
		})
	}
}

// TestRebuildTwoLost: RS with k = 2 rebuilds two wiped members; XOR fails
// the dataset everywhere with the true reason.
func TestRebuildTwoLost(t *testing.T) {
	for _, tc := range []struct {
		p    schemes.Params
		want cache.State
	}{{rs2, cache.Protected}, {xor, cache.Failed}} {
		t.Run(tc.p.Kind.String(), func(t *testing.T) {
			f := newFixture(t, tc.p, memnet.Faults{})
			f.startAll()
			f.write("ckpt.1", 100<<10)
			f.complete(0, "ckpt.1")
			f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
			for _, i := range []int{1, 3} {
				f.Kill(i)
				f.Wipe(i)
			}
			a, b := f.restart(1), f.restart(3)
			<-a
			<-b
			f.WaitState(wait, "ckpt.1", tc.want, f.All()...)
			if tc.want == cache.Protected {
				f.checkFiles("ckpt.1", f.All()...)
				return
			}
			for _, i := range f.All() {
				if _, why := f.Nodes[i].State("ckpt.1"); !strings.Contains(why, "more than xor tolerates") {
					t.Errorf("node %d: failed because %q", i, why)
				}
			}
		})
	}
}

// TestStockTakingOneMissing: a member that does not come back leaves the
// others degraded with the reason, its data kept.
func TestStockTakingOneMissing(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 100<<10)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	for i := range f.Nodes {
		f.Kill(i)
	}
	for _, i := range []int{0, 1, 2} {
		f.restart(i)
	}
	f.WaitState(wait, "ckpt.1", cache.Degraded, 0, 1, 2)
	if _, why := f.Nodes[0].State("ckpt.1"); !strings.Contains(why, "node 3 unreachable") {
		t.Errorf("degraded because %q", why)
	}
	f.checkFiles("ckpt.1", 0, 1, 2)
}

// TestDegradedClearsWhenMemberReturns: the member that was away comes back
// with its cache intact, and the set is protected again without a restart
// of the others.
func TestDegradedClearsWhenMemberReturns(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 100<<10)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	for i := range f.Nodes {
		f.Kill(i)
	}
	for _, i := range []int{0, 1, 2} {
		<-f.restart(i)
	}
	f.WaitState(wait, "ckpt.1", cache.Degraded, 0, 1, 2)
	<-f.restart(3)
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
}

// TestMemberDownFailsDataset: a node that cannot report its share (it is
// down) makes the dataset failed everywhere, naming it — never protected
// without its files.
func TestMemberDownFailsDataset(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 10<<10)
	f.Kill(3)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Failed, 0, 1, 2)
	if _, why := f.Nodes[1].State("ckpt.1"); !strings.Contains(why, "node 3 did not report its share") {
		t.Errorf("failed because %q", why)
	}
}

// TestVerdictTimeoutDegrades: a member whose readiness never reaches the
// set's coordinator leaves the ready ones degraded, naming it, within
// redundancy.timeout; its data is kept everywhere.
func TestVerdictTimeoutDegrades(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{Call: func(from, to int, kind string) memnet.Drop {
		if kind == "redundancy.ready" && from == 3 {
			return memnet.DropRequest
		}
		return memnet.Deliver
	}})
	f.startAll()
	f.write("ckpt.1", 10<<10)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Degraded, f.All()...)
	if _, why := f.Nodes[1].State("ckpt.1"); !strings.Contains(why, "node 3 not ready") {
		t.Errorf("degraded because %q", why)
	}
	f.checkFiles("ckpt.1", f.All()...)
}

// TestConcurrentCompletions: two datasets completed at once from two
// nodes are both protected everywhere.
func TestConcurrentCompletions(t *testing.T) {
	f := newFixture(t, rs2, memnet.Faults{})
	f.startAll()
	f.write("a", 100<<10)
	f.write("b", 100<<10)
	go f.complete(0, "a")
	f.complete(3, "b")
	f.WaitState(wait, "a", cache.Protected, f.All()...)
	f.WaitState(wait, "b", cache.Protected, f.All()...)
	f.checkFiles("a", f.All()...)
	f.checkFiles("b", f.All()...)
}

// TestKillMidEncode: a member dies while the set encodes; the others end
// degraded rather than hang, and once it is back the set protects the
// dataset.
func TestKillMidEncode(t *testing.T) {
	var sent atomic.Int64
	started := make(chan struct{})
	f := newFixture(t, xor, memnet.Faults{StreamDelay: func(from, to int, id string) time.Duration {
		if sent.Add(1) == 20 {
			close(started)
		}
		return 200 * time.Microsecond // keeps the encode going long enough to be interrupted
	}})
	f.startAll()
	f.write("ckpt.1", 1<<20)
	f.complete(0, "ckpt.1")
	<-started
	f.Kill(2)
	f.WaitState(wait, "ckpt.1", cache.Degraded, 0, 1, 3)
	<-f.restart(2)
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
}

// TestFaultyNetwork: calls dropped and delayed, streams reordered against
// each other. Whatever happens, every node settles, and no node says
// protected unless every node does (an encode succeeds on all or none).
func TestFaultyNetwork(t *testing.T) {
	for seed := range uint64(6) {
		t.Run("", func(t *testing.T) {
			var calls atomic.Uint64
			f := newFixture(t, rs2, memnet.Faults{
				Call: func(from, to int, kind string) memnet.Drop {
					if (calls.Add(1)+seed)%7 == 0 {
						return memnet.Drop(1 + seed%2)
					}
					return memnet.Deliver
				},
				Delay: func(from, to int, kind string) time.Duration {
					return time.Duration(seed*(uint64(from+to)%3)) * time.Millisecond
				},
				StreamDelay: func(from, to int, id string) time.Duration {
					return time.Duration((from*3+to)%4) * 50 * time.Microsecond
				},
			})
			f.startAll()
			f.write("ckpt.1", 64<<10)
			f.complete(0, "ckpt.1")
			f.Wait(wait, "every node settled", func() string { return f.Describe("ckpt.1") }, func() bool {
				for _, n := range f.Nodes {
					if st, _ := n.State("ckpt.1"); st != cache.Protected && st != cache.Degraded {
						return false
					}
				}
				return true
			})
			protected := 0
			for _, n := range f.Nodes {
				if st, _ := n.State("ckpt.1"); st == cache.Protected {
					protected++
				}
			}
			if protected != 0 && protected != len(f.Nodes) {
				t.Errorf("%d of %d nodes protected", protected, len(f.Nodes))
			}
			f.checkFiles("ckpt.1", f.All()...)
		})
	}
}
