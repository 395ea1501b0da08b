package completion_test

import (
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/node"
	"github.com/scrfs/scrfs/node/nodetest"
)

// TestNodeZeroMessagesDoNotGrow: in a job of 24 nodes, node 0 sends each
// of a completion's job-wide requests (began, share, record) to at most
// jobnet.DefaultWidth nodes, which pass them on: its messages per dataset
// stay those of an 8-node job however large the job grows.
func TestNodeZeroMessagesDoNotGrow(t *testing.T) {
	const nodes = 24
	var mu sync.Mutex
	sent := map[string]int{} // request kind → calls node 0 sent
	j := nodetest.New(t, nodes, memnet.Faults{Call: func(from, to int, kind string) memnet.Drop {
		if from == 0 {
			mu.Lock()
			sent[jobnet.RequestKind(kind)]++
			mu.Unlock()
		}
		return memnet.Deliver
	}}, nodetest.Config{
		Scheme: layout.Scheme{Kind: layout.KindXOR}, SetSize: 4, CacheSize: 2,
		Options: node.Options{Timeout: 5 * time.Second, ConnectTimeout: 5 * time.Second, MemberTimeout: 5 * time.Second},
	})
	j.RestartAll()
	mu.Lock()
	clear(sent)
	mu.Unlock()
	writeAll(j, "ckpt.1")
	complete(t, j, 5, "ckpt.1")
	j.WaitState(wait, "ckpt.1", cache.Protected, j.All()...)
	mu.Lock()
	defer mu.Unlock()
	for _, kind := range []string{"completion.began", "completion.share", "completion.record"} {
		if sent[kind] == 0 || sent[kind] > jobnet.DefaultWidth {
			t.Errorf("node 0 sent %d %q requests for one dataset in a job of %d (want 1 to %d): %v",
				sent[kind], kind, nodes, jobnet.DefaultWidth, sent)
		}
	}
}
