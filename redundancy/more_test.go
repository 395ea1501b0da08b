package redundancy_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/node/nodetest"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/redfile"
	"github.com/scrfs/scrfs/schemes"
)

// TestRuleFiredCompletesEverywhere: a completion rule firing on one node
// completes the dataset on every node, which then protect it.
func TestRuleFiredCompletesEverywhere(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 50<<10)
	n := f.Nodes[2]
	if err := n.Store.RequestComplete("ckpt.1", "marker COMPLETE"); err != nil {
		t.Fatal(err)
	}
	f.p(2).Complete.RuleFired(n.Store.Get("ckpt.1").Route(), "marker COMPLETE")
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
}

// TestNodeThatWroteNothing takes part with an empty share, and a
// replacement of it is rebuilt empty.
func TestNodeThatWroteNothing(t *testing.T) {
	f := newFixture(t, rs2, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 50<<10, 1)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.Kill(1)
	f.Wipe(1)
	<-f.restart(1)
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
}

// TestPartnerTwoReplicas rebuilds two neighbouring members, which two
// copies to the left survive.
func TestPartnerTwoReplicas(t *testing.T) {
	p := partner
	p.Replicas = 2
	f := newFixture(t, p, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 80<<10)
	f.complete(3, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	for _, i := range []int{1, 2} {
		f.Kill(i)
		f.Wipe(i)
	}
	a, b := f.restart(1), f.restart(2)
	<-a
	<-b
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
}

// TestTwoSets: sets protect independently, and one loss in each is rebuilt
// within its own set.
func TestTwoSets(t *testing.T) {
	f := newSets(t, xor, 2, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 40<<10)
	f.complete(5, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	for _, i := range []int{2, 7} {
		f.Kill(i)
		f.Wipe(i)
	}
	a, b := f.restart(2), f.restart(7)
	<-a
	<-b
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
}

// TestCorruptRedundancyFileRebuilt: a member whose redundancy file was
// damaged on disk is rebuilt from the others at the next restart, never
// trusted.
func TestCorruptRedundancyFileRebuilt(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	f.write("ckpt.1", 100<<10)
	f.complete(0, "ckpt.1")
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	files, _ := filepath.Glob(filepath.Join(f.Nodes[1].Store.Get("ckpt.1").Dir(), ".scrfs", "*.redset"))
	if len(files) != 1 {
		t.Fatalf("redundancy files of node 1: %v", files)
	}
	for i := range f.Nodes {
		f.Kill(i)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-100] ^= 1
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	var done []<-chan struct{}
	for i := range f.Nodes {
		done = append(done, f.restart(i))
	}
	for _, d := range done {
		<-d
	}
	f.WaitState(wait, "ckpt.1", cache.Protected, f.All()...)
	f.checkFiles("ckpt.1", f.All()...)
}

// TestSingleRecordsMetadata: under SINGLE a completed dataset settles at
// once — here flushed at once, as flush.every = 1 — with a header that lets
// a restart verify its files.
func TestSingleRecordsMetadata(t *testing.T) {
	// Opened first, so it is closed after the nodes stop (cleanups run
	// last first).
	pfx := nodetest.Prefix(t, t.TempDir())
	f := newFixture(t, schemes.Params{Kind: schemes.Single, Size: 1}, memnet.Faults{})
	f.Cfg.Options.Prefix, f.Cfg.Options.Every = pfx, 1
	f.startAll()
	f.write("ckpt.1", 10<<10)
	f.complete(0, "ckpt.1")
	f.Wait(wait, "ckpt.1 flushed", nil, func() bool {
		ds := f.Nodes[0].Store.Get("ckpt.1")
		return ds != nil && ds.Info().Flush.State == cache.FlushDone
	})
	ds := f.Nodes[0].Store.Get("ckpt.1")
	m := schemes.Member{Set: schemes.SetInfo{Groups: 1, Nodes: []int{0}}, Dataset: "ckpt.1", Dir: ds.Dir()}
	if _, err := schemes.Inspect(schemes.Params{Kind: schemes.Single, Size: 1}, m); err != nil {
		t.Fatalf("inspect after SINGLE: %v", err)
	}
}

// TestPeerNamesChecked: a dataset name a peer made up never reaches the
// store, whatever the request.
func TestPeerNamesChecked(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	for kind, req := range map[string]any{
		"completion.complete": map[string]any{"dataset": "../../victim", "kind": "dir", "root": "../../victim"},
		"redundancy.ready":    map[string]any{"dataset": ".scrfs", "rank": 1},
		"redundancy.rebuild":  map[string]any{"dataset": map[string]any{"name": "a/b"}, "lost": []int{1}},
		"redundancy.outcome":  map[string]any{"dataset": map[string]any{"name": ".."}, "kind": "fail"},
	} {
		if answer := f.Forge(1, 0, kind, req); !strings.Contains(answer, "bad "+kind+" request") {
			t.Errorf("%s with a made-up name: %s", kind, answer)
		}
	}
	if dss := f.Nodes[0].Store.Datasets(); len(dss) != 0 {
		t.Errorf("node 0 holds %d datasets after made-up requests", len(dss))
	}
}

// TestEncodeReadsTheRecord: a member's redundancy file records its files
// as the dataset's record lists them (with their CRC32Cs added), not a
// walk of the directory made later: the dataset directory's times are
// those from before its .scrfs existed.
func TestEncodeReadsTheRecord(t *testing.T) {
	f := newFixture(t, xor, memnet.Faults{})
	f.startAll()
	f.protect("ckpt.1", 20<<10)
	for _, i := range f.All() {
		dir := f.Nodes[i].Store.Get("ckpt.1").Dir()
		rec, err := record.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		me := rec.Member(f.Nodes[i].Store.NodeID())
		got, err := redfile.MemberFiles(dir, me.Node)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(me.Files) {
			t.Fatalf("node %d: redundancy file lists %d files, the record %d", i, len(got), len(me.Files))
		}
		for k, g := range got {
			g.HasCRC, g.CRC32C = false, 0
			if !reflect.DeepEqual(g, me.Files[k]) {
				t.Errorf("node %d file %d: redundancy file %+v, record %+v", i, k, g, me.Files[k])
			}
		}
	}
}
