package transfer_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/node"
	"github.com/scrfs/scrfs/node/nodetest"
	"github.com/scrfs/scrfs/prefix"
	"github.com/scrfs/scrfs/transfer"
)

// node/nodetest has no tests of its own: the tests that run whole jobs on
// it check its goroutines too, and those of the nodes and stores it opens.
func TestMain(m *testing.M) {
	testutil.LeakCheckMain(m, "scrfs/transfer.", "scrfs/node.", "scrfs/node/nodetest.", "scrfs/cache.")
}

const wait = 20 * time.Second // bound of every wait: far above what a test needs

// fixture is a job of nodes under SINGLE (datasets settle as soon as they
// are recorded) over a shared prefix directory: these tests are about flush
// and fetch, not redundancy.
type fixture struct {
	*nodetest.Job
	prefix  string
	written map[string]map[int]map[string]string
}

func newFixture(t *testing.T, nodes int, faults memnet.Faults) *fixture {
	return newFixtureAt(t, nodes, faults, filepath.Join(t.TempDir(), "prefix"))
}

// newFixtureAt is newFixture over an existing prefix (a later job's).
func newFixtureAt(t *testing.T, nodes int, faults memnet.Faults, prefix string) *fixture {
	return &fixture{
		Job: nodetest.New(t, nodes, faults, nodetest.Config{
			Scheme: layout.Scheme{Kind: layout.KindSingle}, SetSize: 1,
			Options: node.Options{
				Prefix: nodetest.Prefix(t, prefix), Fetch: true, Streams: 2, CRC: true,
				Timeout: time.Second, ConnectTimeout: time.Second, MemberTimeout: time.Second,
			},
		}),
		prefix:  prefix,
		written: map[string]map[int]map[string]string{},
	}
}

func (f *fixture) fl(i int) *transfer.Flusher { return f.Nodes[i].Protocols.Flusher }

// startAll starts every node as the daemon does (restore, then flushes).
func (f *fixture) startAll() { f.RestartAll() }

// start starts node i as the daemon does.
func (f *fixture) start(i int) <-chan struct{} { return f.Restart(i) }

// write has every node write files of dataset name, completes it
// job-wide and waits until every node recorded it.
func (f *fixture) write(name string, size int) {
	f.written[name] = map[int]map[string]string{}
	for _, n := range f.Nodes {
		b := make([]byte, size+n.Index)
		for i := range b {
			b[i] = byte(i*7 + n.Index + len(name))
		}
		n.Write(name, map[string][]byte{"rank_" + string(rune('0'+n.Index)) + ".bin": b})
		f.written[name][n.Index] = n.Sums(name)
	}
	if err := f.Nodes[0].Protocols.Complete.Complete(context.Background(), name); err != nil {
		f.T.Fatal(err)
	}
	f.Wait(wait, name+" recorded everywhere", func() string { return f.Describe(name) }, func() bool {
		for _, n := range f.Nodes {
			if ds := n.Store.Get(name); ds == nil || ds.Info().Seq == 0 {
				return false
			}
		}
		return true
	})
}

// flush asks node i to flush dataset name, as `scrfs flush NAME`.
func (f *fixture) flush(i int, name string) transfer.Requested {
	f.T.Helper()
	rep, err := f.fl(i).Request(context.Background(), name, false)
	if err != nil {
		f.T.Fatalf("flush %s from node %d: %v", name, i, err)
	}
	return rep
}

// flushState returns dataset name's flush state on node i.
func (f *fixture) flushState(i int, name string) cache.FlushState {
	n := f.Nodes[i]
	if n.Store == nil {
		return ""
	}
	if ds := n.Store.Get(name); ds != nil {
		return ds.Info().Flush.State
	}
	return ""
}

// waitFlush waits until every node has dataset name in flush state st.
func (f *fixture) waitFlush(name string, st cache.FlushState) {
	f.T.Helper()
	f.Wait(wait, name+" flush "+string(st)+" everywhere", func() string { return f.describeFlush(name) }, func() bool {
		for i := range f.Nodes {
			if f.flushState(i, name) != st {
				return false
			}
		}
		return true
	})
}

func (f *fixture) describeFlush(name string) string {
	out := ""
	for i := range f.Nodes {
		out += " node " + string(rune('0'+i)) + ": " + string(f.flushState(i, name))
		if n := f.Nodes[i]; n.Store != nil {
			if ds := n.Store.Get(name); ds != nil {
				out += " " + ds.Info().Flush.Error
			}
		}
		out += ";"
	}
	return out
}

// index returns the prefix's index entry of dataset name.
func (f *fixture) index(name string) (prefix.IndexEntry, bool) {
	ix, err := nodetest.Prefix(f.T, f.prefix).ReadIndex(context.Background())
	if err != nil {
		f.T.Fatal(err)
	}
	return ix.Lookup(name)
}

// checkFiles fails unless every node holds exactly what it wrote of name.
func (f *fixture) checkFiles(name string) {
	f.T.Helper()
	for _, n := range f.Nodes {
		if got, want := n.Sums(name), f.written[name][n.Index]; !maps.Equal(got, want) {
			f.T.Errorf("node %d: %s holds %v, wrote %v", n.Index, name, got, want)
		}
	}
}

// corrupt flips one byte of node i's file of dataset name in the prefix.
func (f *fixture) corrupt(name string, i int) {
	p := filepath.Join(layout.PrefixDatasetDir(f.prefix, name), "rank_"+string(rune('0'+i))+".bin")
	b, err := os.ReadFile(p)
	if err != nil {
		f.T.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		f.T.Fatal(err)
	}
}
