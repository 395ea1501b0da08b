package redundancy_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/record"
)

// TestRebuildTargetReplacedAgain: a node lost (wiped) is lost again, wiped
// once more, between the stock-taking that plans its rebuild and the
// rebuild itself (the chaos test's finding). The plan was made for its
// former identity: the new daemon takes no part in it, the next
// stock-taking rebuilds its share onto it as its own, and every node ends
// protected, none holding two members' shares.
func TestRebuildTargetReplacedAgain(t *testing.T) {
	// The first round's rebuild calls wait until node 1 was replaced again.
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f := newFixture(t, xor, memnet.Faults{Delay: func(from, to int, kind string) time.Duration {
		if kind == "redundancy.rebuild" {
			once.Do(func() { close(reached) })
			<-release
		}
		return 0
	}})
	f.startAll()
	f.protect("ckpt.1", 100<<10)

	f.Kill(1)
	f.Wipe(1)
	first := f.restart(1)
	<-reached // the rebuild onto node 1 is planned and on its way
	f.Kill(1)
	f.Wipe(1)
	second := f.restart(1)
	close(release)
	<-first
	<-second
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
	for _, i := range f.All() {
		if _, why := f.Nodes[i].State("ckpt.1"); why != "" {
			t.Errorf("node %d: ckpt.1 protected saying %q", i, why)
		}
	}
}

// TestEvictedElsewhereNotFailed: a dataset still held on one node (a
// flush pins it there) while the others evicted it for the cache size is
// not "lost beyond tolerance" when the job takes stock: it is left to go,
// and the node that held it evicts it once unpinned, reporting no failure.
func TestEvictedElsewhereNotFailed(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.Cfg.CacheSize = 1
	f.startAll()
	f.protect("ckpt.1", 50<<10)
	unpin := f.Nodes[3].Store.Get("ckpt.1").Pin()
	f.protect("ckpt.2", 50<<10)
	f.WaitState(wait, "ckpt.1", "", 0, 1, 2)

	f.Kill(1)
	<-f.restart(1) // the job takes stock
	unpin()
	f.WaitState(wait, "ckpt.1", "", f.All()...)
	f.WaitState(wait, "ckpt.2", cache.Protected, f.All()...)
}

// TestProtectAskedAgainWhileEncoding: a dataset never encoded is protected
// again while its encode runs (stock-takings back to back each found it
// never encoded: the chaos test's finding). One encode runs per node at a
// time; the second protect, finding the dataset protected after the
// first, does nothing — two at once wrote the same redundancy file and
// failed each other, leaving the set degraded with every node up.
func TestProtectAskedAgainWhileEncoding(t *testing.T) {
	var ready atomic.Bool
	f := newFixture(t, xor, memnet.Faults{
		Call: func(from, to int, kind string) memnet.Drop {
			if kind == "redundancy.ready" && !ready.Load() {
				return memnet.DropRequest
			}
			return memnet.Deliver
		},
		// Slow enough that the second protect comes while the first encodes.
		StreamDelay: func(from, to int, id string) time.Duration { return 20 * time.Millisecond },
	})
	f.startAll()
	f.write("ckpt.1", 200<<10)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Degraded, f.All()...) // no set coordinator: never encoded
	ready.Store(true)
	rec, err := record.Load(f.Nodes[0].Store.Get("ckpt.1").Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range f.All() {
		f.p(i).Protect.Protect(rec)
	}
	awaitEncode(t, f, 0, "ckpt.1")
	for _, i := range f.All() {
		f.p(i).Protect.Protect(rec)
	}
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	end := time.Now().Add(3 * time.Second) // past every protect's verdict timeout
	for time.Now().Before(end) {
		for _, i := range f.All() {
			if st, why := f.Nodes[i].State("ckpt.1"); st != cache.Protected {
				t.Fatalf("node %d: ckpt.1 went %s (%s)", i, st, why)
			}
		}
		time.Sleep(20 * time.Millisecond) // a poll of the state
	}
	f.checkFiles("ckpt.1", f.All()...)
}

// awaitEncode waits until node i encodes dataset name: the encode writes
// its redundancy file beside the final name, which no store change tells
// of, so the file system is polled.
func awaitEncode(t *testing.T, f *fixture, i int, name string) {
	t.Helper()
	testutil.Eventually(t, wait, fmt.Sprintf("an encode of %s under way on node %d", name, i), func() bool {
		tmp, err := filepath.Glob(filepath.Join(f.Nodes[i].Store.Get(name).Dir(), layout.MetaDir, "*.redset.tmp"))
		if err != nil {
			t.Fatal(err)
		}
		return len(tmp) > 0
	})
}

// TestFailedProtectTriesAgain: a member's ready never reaches the set's
// coordinator, so the set's protect fails on every node with every node
// up; nothing else would try again (no node restarts), so the members ask
// node 0 to take stock, which has them encode again, and the set ends
// protected.
func TestFailedProtectTriesAgain(t *testing.T) {
	var drop atomic.Bool
	drop.Store(true)
	f := newFixture(t, xor, memnet.Faults{Call: func(from, to int, kind string) memnet.Drop {
		if kind == "redundancy.ready" && from == 3 && drop.Load() {
			return memnet.DropRequest
		}
		return memnet.Deliver
	}})
	f.startAll()
	f.write("ckpt.1", 50<<10)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Degraded, 3)
	drop.Store(false)
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
}

// replaceNode2 protects ckpt.1 on an XOR fixture, then kills node 2, wipes
// its cache and starts a replacement; from the wipe on, calls for which
// drop says so are lost.
func replaceNode2(t *testing.T, drop func(to int, kind string) bool) *fixture {
	var armed atomic.Bool
	f := newFixture(t, xor, memnet.Faults{Call: func(from, to int, kind string) memnet.Drop {
		if armed.Load() && drop(to, kind) {
			return memnet.DropRequest
		}
		return memnet.Deliver
	}})
	f.startAll()
	f.protect("ckpt.1", 100<<10)
	f.Kill(2)
	f.Wipe(2)
	armed.Store(true)
	<-f.restart(2)
	return f
}

// TestFailedRebuildTriedAgain: the rebuild of a replacement's share fails
// once (its call lost); no node restarts after that. The survivors say the
// set is degraded meanwhile (they said protected, one member short), and
// the job takes stock again: the share is rebuilt and every node ends
// protected.
func TestFailedRebuildTriedAgain(t *testing.T) {
	var lost atomic.Bool
	f := replaceNode2(t, func(to int, kind string) bool {
		return kind == "redundancy.rebuild" && to == 2 && lost.CompareAndSwap(false, true)
	})
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
}

// TestFailedRebuildDegradesSurvivors: a rebuild fails (the replacement
// never hears of it) and the job's verdict never reaches the survivors
// either: each survivor says degraded by itself when its own part fails,
// rather than protected, as if the set were whole.
func TestFailedRebuildDegradesSurvivors(t *testing.T) {
	f := replaceNode2(t, func(to int, kind string) bool {
		return (kind == "redundancy.rebuild" && to == 2) || kind == "redundancy.outcome"
	})
	f.WaitState(wait, "ckpt.1", cache.Degraded, 0, 1, 3)
}

// TestStockTakingLeavesArrivalsAlone: a dataset node 0's restore fetches
// from the prefix (Store.Arriving) is left alone by the stock-taking, even
// where the copies in the caches are beyond repair: the fetched copy takes
// their place, and a verdict on them would fail the checkpoint the job is
// restoring. Once the arrival is over, the same state is failed.
func TestStockTakingLeavesArrivalsAlone(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	f.protect("ckpt.1", 10<<10)
	arrived := f.Nodes[0].Store.Arriving("ckpt.1")
	for _, i := range []int{2, 3} {
		f.Kill(i)
		f.Wipe(i)
	}
	<-f.restart(2)
	<-f.restart(3) // each restart waits for the stock-taking it asks for
	for _, i := range []int{0, 1} {
		if st, why := f.Nodes[i].State("ckpt.1"); st != cache.Protected {
			t.Fatalf("node %d: ckpt.1 %s (%q) while the restore fetches it", i, st, why)
		}
	}
	arrived()
	f.Kill(3)
	<-f.restart(3)
	f.WaitState(wait, "ckpt.1", cache.Failed, 0, 1)
}
