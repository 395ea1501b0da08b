package redundancy_test

import (
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet/memnet"
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
		if kind == "rebuild" {
			once.Do(func() { close(reached) })
			<-release
		}
		return 0
	}})
	f.startAll()
	f.write("ckpt.1", 100<<10)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)

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
	f.write("ckpt.1", 50<<10)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	unpin := f.Nodes[3].Store.Get("ckpt.1").Pin()
	f.write("ckpt.2", 50<<10)
	f.complete(0, "ckpt.2")
	f.WaitState(wait, "ckpt.2", cache.Protected, f.All()...)
	f.WaitState(wait, "ckpt.1", "", 0, 1, 2)

	f.Kill(1)
	<-f.restart(1) // the job takes stock
	unpin()
	f.WaitState(wait, "ckpt.1", "", f.All()...)
	f.WaitState(wait, "ckpt.2", cache.Protected, f.All()...)
}
