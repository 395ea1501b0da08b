package pointers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/pointers"
)

func TestMain(m *testing.M) {
	testutil.LeakCheckMain(m, "scrfs/pointers.", "scrfs/jobnet", "scrfs/cache.")
}

// job is n nodes' pointer files on one in-memory network, each with a
// real store.
type job struct {
	t      *testing.T
	net    *memnet.Network
	stores []*cache.Store
	ptrs   []*pointers.Pointers
}

func newJob(t *testing.T, n int) *job {
	t.Helper()
	net := memnet.New(memnet.Faults{})
	router, err := cache.NewRouter(regexp.MustCompile(`^(?P<dataset>[^/]+)/`))
	if err != nil {
		t.Fatal(err)
	}
	j := &job{t: t, net: net}
	for range n {
		base := t.TempDir()
		s, err := cache.Open(cache.Options{CacheDir: jobdir.Path{Base: base, Names: []string{"cache"}},
			ControlDir: jobdir.Path{Base: base, Names: []string{"control"}}, CacheSize: 4, Router: router})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		j.stores, j.ptrs = append(j.stores, s), append(j.ptrs, nil)
	}
	for i := range n {
		j.start(i)
	}
	return j
}

// start starts node i's pointer files anew, as a daemon's start does.
func (j *job) start(i int) {
	m := jobnet.NewMux(i)
	p := pointers.New(pointers.Options{Mux: m, Store: j.stores[i], Nodes: len(j.stores), ConnectTimeout: 5 * time.Second})
	m.Attach(j.net.Join(i, m.Serve))
	j.t.Cleanup(func() { j.net.Kill(i); p.Close() })
	j.ptrs[i] = p
}

// begin starts dataset name on every node.
func (j *job) begin(name string) {
	for _, s := range j.stores {
		if _, _, err := s.Obtain(cache.Route{Name: name, Kind: cache.KindDir, Root: name}); err != nil {
			j.t.Fatal(err)
		}
	}
}

// record completes dataset name on every node and records it with
// sequence seq.
func (j *job) record(name string, seq uint64) {
	for _, s := range j.stores {
		if err := s.RequestComplete(name, "test"); err != nil {
			j.t.Fatal(err)
		}
		testutil.Eventually(j.t, 5*time.Second, name+" complete", func() bool { return s.Get(name).State().Completed() })
		if err := s.SetRecord(name, seq, time.Now()); err != nil {
			j.t.Fatal(err)
		}
	}
}

func file(name, data string) cache.Pointer {
	return cache.Pointer{Name: name, Type: cache.PointerFile, Mode: 0o644, Data: []byte(data)}
}

// shown returns node i's pointer files as name=data.
func (j *job) shown(i int) []string {
	var out []string
	for _, p := range j.stores[i].Pointers() {
		out = append(out, fmt.Sprintf("%s=%s", p.Name, p.Data))
	}
	return out
}

// TestChangeIsTheJobs: a change on any node is shown on every node when
// the call returns, and kept with the newest dataset on every node.
func TestChangeIsTheJobs(t *testing.T) {
	j := newJob(t, 3)
	ctx := context.Background()
	j.begin("ckpt.1")
	j.record("ckpt.1", 1)
	j.begin("ckpt.2")
	if err := j.ptrs[2].Change(ctx, []cache.Pointer{file("latest", "ckpt.2")}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range j.stores {
		if got := j.shown(i); !slices.Equal(got, []string{"latest=ckpt.2"}) {
			t.Errorf("node %d shows %v", i, got)
		}
		if ps, ok, err := j.stores[i].DatasetPointers("ckpt.2"); !ok || err != nil || len(ps) != 1 {
			t.Errorf("node %d kept %v (%v, %v) with ckpt.2, the newest", i, ps, ok, err)
		}
		if _, ok, _ := j.stores[i].DatasetPointers("ckpt.1"); ok {
			t.Errorf("node %d kept pointer files with ckpt.1, which was not the newest", i)
		}
	}
	// A rename: set the new name, remove the old.
	if err := j.ptrs[1].Change(ctx, []cache.Pointer{file("tracker", "2")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := j.ptrs[0].Change(ctx, []cache.Pointer{file("tracker.txt", "2")}, []string{"tracker"}); err != nil {
		t.Fatal(err)
	}
	if got := j.shown(2); !slices.Equal(got, []string{"latest=ckpt.2", "tracker.txt=2"}) {
		t.Errorf("node 2 shows %v after the rename", got)
	}
	// Past the bound: refused, nothing changed.
	big := cache.Pointer{Name: "big", Type: cache.PointerFile, Data: make([]byte, cache.MaxPointerSize+1)}
	if err := j.ptrs[1].Change(ctx, []cache.Pointer{big}, nil); err == nil {
		t.Error("a pointer file past 1 MiB was taken")
	}
}

// TestRestoreShowsTheRestoredCheckpoints: a start shows the pointer files
// of the newest recorded checkpoint, not those written while a newer one
// that failed was written; a node that holds that checkpoint without them
// (rebuilt, fetched) gets them from another node.
func TestRestoreShowsTheRestoredCheckpoints(t *testing.T) {
	j := newJob(t, 3)
	ctx := context.Background()
	j.begin("ckpt.1")
	if err := j.ptrs[0].Change(ctx, []cache.Pointer{file("latest", "ckpt.1")}, nil); err != nil {
		t.Fatal(err)
	}
	j.record("ckpt.1", 1)
	j.begin("ckpt.2")
	if err := j.ptrs[0].Change(ctx, []cache.Pointer{file("latest", "ckpt.2")}, nil); err != nil {
		t.Fatal(err)
	}
	// ckpt.2 fails; node 2 lost what it kept with ckpt.1; nodes 0 and 2
	// restart.
	for _, s := range j.stores {
		if err := s.Fail("ckpt.2", "test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(j.stores[2].Get("ckpt.1").Dir(), ".scrfs", cache.PointersFile)); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		j.stores[i].ShowPointers(nil)
		j.start(i)
		j.ptrs[i].Restored(ctx)
		if got := j.shown(i); !slices.Equal(got, []string{"latest=ckpt.1"}) {
			t.Errorf("node %d shows %v after its restore, want latest=ckpt.1", i, got)
		}
	}
	if _, ok, _ := j.stores[2].DatasetPointers("ckpt.1"); !ok {
		t.Error("node 2 did not keep the pointer files it got from another node")
	}
}
