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
