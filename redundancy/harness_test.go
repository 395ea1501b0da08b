package redundancy_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/node"
	"github.com/scrfs/scrfs/node/nodetest"
	"github.com/scrfs/scrfs/schemes"
)

// node/nodetest has no tests of its own: the tests that run whole jobs on
// it check its goroutines too, and those of the nodes and stores it opens.
func TestMain(m *testing.M) {
	testutil.LeakCheckMain(m, "scrfs/redundancy.", "scrfs/node.", "scrfs/node/nodetest.", "scrfs/cache.")
}

// Schemes of a set of four, as the e2e tests run them.
var (
	xor     = schemes.Params{Kind: schemes.XOR, Size: 4, PieceSize: 16 << 10}
	rs2     = schemes.Params{Kind: schemes.RS, Size: 4, Parity: 2, PieceSize: 16 << 10}
	partner = schemes.Params{Kind: schemes.Partner, Size: 4, Replicas: 1, PieceSize: 16 << 10}
)

// fixture is a job of nodes running the protocols, in sets of p.Size.
type fixture struct {
	*nodetest.Job
	params schemes.Params

	mu  sync.Mutex
	rng *rand.Rand
	// written[dataset][node] is what the node wrote, by path → sha256.
	written map[string]map[int]map[string]string
}

const wait = 20 * time.Second // bound of every wait: far above what a test needs

func newFixture(t *testing.T, p schemes.Params, faults memnet.Faults) *fixture {
	return newSets(t, p, 1, faults)
}

// newSets is a job of sets redundancy sets of p.Size nodes each: nodes
// 0..p.Size-1 form set 0, and so on.
func newSets(t *testing.T, p schemes.Params, sets int, faults memnet.Faults) *fixture {
	cfg := nodetest.Config{
		Scheme:  layout.Scheme{Kind: p.Kind.String(), Replicas: p.Replicas, Parity: p.Parity},
		SetSize: p.Size,
		Options: node.Options{
			PieceSize:      p.PieceSize,
			Timeout:        400 * time.Millisecond,
			ConnectTimeout: time.Second,
			MemberTimeout:  time.Second,
		},
	}
	return &fixture{
		Job:     nodetest.New(t, p.Size*sets, faults, cfg),
		params:  p,
		rng:     rand.New(rand.NewPCG(1, uint64(p.Kind))),
		written: map[string]map[int]map[string]string{},
	}
}

func (f *fixture) p(i int) *node.Node { return f.Nodes[i].Protocols }

// startAll starts every node, as a job's first start.
func (f *fixture) startAll() { f.RestartAll() }

// restart starts node i as the daemon does after a crash.
func (f *fixture) restart(i int) <-chan struct{} { return f.Restart(i) }

// write has every node write a few files of random sizes (up to max bytes)
// into dataset name; node i writes nothing if i is in skip.
func (f *fixture) write(name string, max int, skip ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written[name] = map[int]map[string]string{}
	for _, i := range f.All() {
		n := f.Nodes[i]
		files := map[string][]byte{}
		if !contains(skip, n.Index) {
			for k := range 1 + f.rng.IntN(3) {
				b := make([]byte, f.rng.IntN(max))
				for i := range b {
					b[i] = byte(f.rng.Uint32())
				}
				files[fmt.Sprintf("rank_%d/part_%d.bin", n.Index, k)] = b
			}
		}
		n.Write(name, files)
		f.written[name][n.Index] = n.Sums(name)
	}
}

// complete completes dataset name job-wide from node i, as `scrfs complete`.
func (f *fixture) complete(i int, name string) {
	if err := f.p(i).Complete.Complete(context.Background(), name); err != nil {
		f.T.Fatalf("complete %s on node %d: %v", name, i, err)
	}
}

// protect writes dataset name (files up to max bytes) on every node,
// completes it from node 0 and waits until every node holds it protected.
func (f *fixture) protect(name string, max int) {
	f.T.Helper()
	f.write(name, max)
	f.complete(0, name)
	f.WaitState(wait, name, cache.Protected, f.All()...)
}

// checkFiles fails unless every node of idx holds exactly what it wrote of
// dataset name.
func (f *fixture) checkFiles(name string, idx ...int) {
	f.T.Helper()
	for _, i := range idx {
		f.mu.Lock()
		want := f.written[name][i]
		f.mu.Unlock()
		if got := f.Nodes[i].Sums(name); !maps.Equal(got, want) {
			f.T.Errorf("node %d: %s holds %v, wrote %v", i, name, got, want)
		}
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
