package names_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/names"
)

func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/names", "scrfs/jobnet", "scrfs/cache") }

// copies is a node's store as the names see it: a real store that holds
// the datasets, recording what the job had it do to its copies of
// entries instead of doing it.
type copies struct {
	*cache.Store
	mu  sync.Mutex
	ops []string
}

func (c *copies) RemoveEntry(name, rel string, dir bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, fmt.Sprintf("remove %s/%s dir=%v", name, rel, dir))
	return nil
}

func (c *copies) RenameEntry(name, from, to string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, fmt.Sprintf("rename %s/%s to %s", name, from, to))
	return nil
}

func (c *copies) done() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ops)
}

// job is n nodes' names on one in-memory network.
type job struct {
	net    *memnet.Network
	names  []*names.Names
	copies []*copies
}

// newJob starts n nodes whose stores each began the datasets given.
func newJob(t *testing.T, n int, datasets ...string) *job {
	if len(datasets) == 0 {
		datasets = []string{"ckpt.1"}
	}
	j := &job{net: memnet.New(memnet.Faults{})}
	router, err := cache.NewRouter(regexp.MustCompile(`^(?P<dataset>[^/]+)/`))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		base := t.TempDir()
		run := fmt.Sprint("run-", i)
		s, err := cache.Open(cache.Options{CacheDir: jobdir.Path{Base: base, Names: []string{"cache"}},
			ControlDir: jobdir.Path{Base: base, Names: []string{"control"}}, CacheSize: 4, Router: router, Incarnation: run})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		for _, ds := range datasets {
			if _, _, err := s.Obtain(cache.Route{Name: ds, Kind: cache.KindDir, Root: ds}); err != nil {
				t.Fatal(err)
			}
		}
		m := jobnet.NewMux(i, names.Codes...)
		c := &copies{Store: s}
		j.names = append(j.names, names.New(names.Options{Mux: m, Store: c, Nodes: n, Incarnation: run, MemberTimeout: 5 * time.Second}))
		j.copies = append(j.copies, c)
		m.Attach(j.net.Join(i, m.Serve))
		t.Cleanup(func() { j.net.Kill(i) })
	}
	return j
}

var dir = names.Entry{Type: files.Dir, Mode: 0o755}
var file = names.Entry{Type: files.Regular, Mode: 0o644}

// pathOwnedBy returns a path of the form prefix+N that node owner of a job
// of nodes owns.
func pathOwnedBy(prefix string, owner, nodes int) string {
	for i := 0; ; i++ {
		if p := fmt.Sprint(prefix, i); names.Owner(p, nodes) == owner {
			return p
		}
	}
}

// TestOwnersSpread: paths are owned by every node, not by one.
func TestOwnersSpread(t *testing.T) {
	count := make([]int, 4)
	for i := range 400 {
		count[names.Owner(fmt.Sprintf("step_100/__%d_0.distcp", i), 4)]++
	}
	for n, c := range count {
		if c < 50 {
			t.Errorf("node %d owns %d of 400 paths: %v", n, c, count)
		}
	}
}

// TestCreateThenLookup: a file created on one node is found on another,
// which becomes a holder; a name no node created is not found (ENOENT).
func TestCreateThenLookup(t *testing.T) {
	j := newJob(t, 4)
	ctx := context.Background()
	p := pathOwnedBy("shared.h5.", 3, 4) // owned by neither creator nor reader
	e, err := j.names[0].Create(ctx, "ckpt.1", p, file, false)
	if err != nil || !slices.Equal(e.Holders, []int{0}) {
		t.Fatalf("create: %+v, %v", e, err)
	}
	got, err := j.names[1].Lookup(ctx, "ckpt.1", p)
	if err != nil || got.Type != files.Regular || got.Mode != 0o644 || !slices.Equal(got.Holders, []int{0, 1}) {
		t.Fatalf("lookup on another node: %+v, %v", got, err)
	}
	if _, err := j.names[2].Lookup(ctx, "ckpt.1", "nobody"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of a name nobody created: %v, want ENOENT", err)
	}
	// Opening it for writing on node 2 (a create without O_EXCL) joins it.
	e, err = j.names[2].Create(ctx, "ckpt.1", p, file, false)
	if err != nil || len(e.Holders) != 3 {
		t.Fatalf("second create of a file: %+v, %v", e, err)
	}
}

// TestExclusiveCreateOneWins: nodes create the same file with O_EXCL at
// once: exactly one succeeds, the others get EEXIST. Every mkdir of the
// same directory succeeds; a file where a directory is fails.
func TestExclusiveCreateOneWins(t *testing.T) {
	j := newJob(t, 4)
	ctx := context.Background()
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { _, errs[i] = j.names[i].Create(ctx, "ckpt.1", "lock", file, true) })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, syscall.EEXIST):
			t.Errorf("node %d: %v, want EEXIST", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d exclusive creates won: %v", won, errs)
	}
	for i := range 4 {
		wg.Go(func() { _, errs[i] = j.names[i].Create(ctx, "ckpt.1", "step_100", dir, true) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("mkdir on node %d: %v", i, err)
		}
	}
	if _, err := j.names[0].Create(ctx, "ckpt.1", "step_100", file, false); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("a file where a directory is: %v, want EEXIST", err)
	}
}

// TestRemoveTellsHolders: a file removed on one node is removed on every
// other node that holds a copy, and nowhere else; a directory that holds
// an entry somewhere is not removed (ENOTEMPTY).
func TestRemoveTellsHolders(t *testing.T) {
	j := newJob(t, 4)
	ctx := context.Background()
	must(t, errOf(j.names[0].Create(ctx, "ckpt.1", "d", dir, false)))
	must(t, errOf(j.names[0].Create(ctx, "ckpt.1", "d/f", file, false)))
	must(t, errOf(j.names[2].Lookup(ctx, "ckpt.1", "d/f")))
	if err := j.names[1].Remove(ctx, "ckpt.1", "d", true); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a directory with a file in it: %v, want ENOTEMPTY", err)
	}
	must(t, j.names[1].Remove(ctx, "ckpt.1", "d/f", false))
	for i, want := range [][]string{{"remove ckpt.1/d/f dir=false"}, nil, {"remove ckpt.1/d/f dir=false"}, nil} {
		if got := j.copies[i].done(); !slices.Equal(got, want) {
			t.Errorf("node %d did %q, want %q", i, got, want)
		}
	}
	if _, err := j.names[3].Lookup(ctx, "ckpt.1", "d/f"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup after the remove: %v", err)
	}
	must(t, j.names[1].Remove(ctx, "ckpt.1", "d", true))
}

// TestRenameMovesEveryCopy: a file renamed on one node is renamed on every
// holder; the old name is gone and the new one found; a file it replaced
// is removed where only it was held.
func TestRenameMovesEveryCopy(t *testing.T) {
	j := newJob(t, 3)
	ctx := context.Background()
	must(t, errOf(j.names[0].Create(ctx, "ckpt.1", "latest.tmp", file, false)))
	must(t, errOf(j.names[1].Lookup(ctx, "ckpt.1", "latest.tmp")))
	must(t, errOf(j.names[2].Create(ctx, "ckpt.1", "latest", file, false)))
	must(t, j.names[0].Rename(ctx, "ckpt.1", "latest.tmp", "latest"))
	for i, want := range [][]string{nil, {"rename ckpt.1/latest.tmp to latest"}, {"remove ckpt.1/latest dir=false"}} {
		if got := j.copies[i].done(); !slices.Equal(got, want) {
			t.Errorf("node %d did %q, want %q", i, got, want)
		}
	}
	if _, err := j.names[2].Lookup(ctx, "ckpt.1", "latest.tmp"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("old name after the rename: %v", err)
	}
	if e, err := j.names[2].Lookup(ctx, "ckpt.1", "latest"); err != nil || !slices.Contains(e.Holders, 0) {
		t.Fatalf("new name after the rename: %+v, %v", e, err)
	}
}

// TestRenameDirMovesEverything: a directory renamed on one node (Orbax's
// default.orbax-checkpoint-tmp to default) moves every entry below it to
// its new path and owner, every other node renames its copy, and a
// target that exists is refused.
func TestRenameDirMovesEverything(t *testing.T) {
	j := newJob(t, 4)
	ctx := context.Background()
	must(t, errOf(j.names[0].Create(ctx, "ckpt.1", "tmp", dir, false)))
	var inside []string
	for i := range 4 {
		p := fmt.Sprintf("tmp/ocdbt.process_%d", i)
		must(t, errOf(j.names[i].Create(ctx, "ckpt.1", p, dir, false)))
		must(t, errOf(j.names[i].Create(ctx, "ckpt.1", p+"/d", file, false)))
		inside = append(inside, fmt.Sprintf("ocdbt.process_%d", i))
	}
	must(t, errOf(j.names[1].Create(ctx, "ckpt.1", "taken", dir, false)))
	if err := j.names[2].RenameDir(ctx, "ckpt.1", "tmp", "taken"); !errors.Is(err, names.ErrExists) {
		t.Fatalf("rename onto an existing entry: %v, want ErrExists", err)
	}
	must(t, j.names[2].RenameDir(ctx, "ckpt.1", "tmp", "default"))
	for i := range 4 {
		got, err := j.names[i].List(ctx, "ckpt.1", "default")
		if err != nil || !slices.Equal(slices.Sorted(maps.Keys(got)), inside) {
			t.Fatalf("node %d lists default as %v, %v; want %v", i, slices.Sorted(maps.Keys(got)), err, inside)
		}
		if e, err := j.names[i].Lookup(ctx, "ckpt.1", "default/ocdbt.process_3/d"); err != nil || e.Type != file.Type {
			t.Fatalf("node %d looks up a file below the renamed directory: %+v, %v", i, e, err)
		}
		if _, err := j.names[i].Lookup(ctx, "ckpt.1", "tmp/ocdbt.process_0/d"); !errors.Is(err, names.ErrNotFound) {
			t.Fatalf("node %d still finds the old path: %v", i, err)
		}
	}
	for i, c := range j.copies {
		want := []string{"rename ckpt.1/tmp to default"}
		if i == 2 { // the caller renames its own copy
			want = nil
		}
		if got := c.done(); !slices.Equal(got, want) {
			t.Errorf("node %d did %v to its copies, want %v", i, got, want)
		}
	}
}

// TestListGathersEveryOwner: a directory's entries, owned by several
// nodes, are listed whole on any node; a dropped dataset lists nothing.
func TestListGathersEveryOwner(t *testing.T) {
	j := newJob(t, 4)
	ctx := context.Background()
	var want []string
	for owner := range 4 {
		p := pathOwnedBy("rank_", owner, 4)
		must(t, errOf(j.names[owner%2].Create(ctx, "ckpt.1", p, file, false)))
		want = append(want, p)
	}
	must(t, errOf(j.names[0].Create(ctx, "ckpt.1", "sub", dir, false)))
	must(t, errOf(j.names[0].Create(ctx, "ckpt.1", "sub/inner", file, false)))
	want = append(want, "sub")
	got, err := j.names[3].List(ctx, "ckpt.1", "")
	if err != nil || !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("list of the root: %v, %v; want %v", slices.Sorted(maps.Keys(got)), err, want)
	}
	for i := range j.names {
		j.names[i].Drop("ckpt.1")
	}
	if got, err := j.names[1].List(ctx, "ckpt.1", ""); err != nil || len(got) != 0 {
		t.Fatalf("list after the dataset was dropped: %v, %v", got, err)
	}
}

// TestListWhileANodeHasNotHeard: a listing right after a dataset began
// (Hugging Face's save_pretrained lists the directory it just made) is
// answered by every node; one that has not heard yet that the dataset
// began owns none of its entries, and the listing goes on without them.
func TestListWhileANodeHasNotHeard(t *testing.T) {
	j := newJob(t, 4)
	ctx := context.Background()
	for i := range 3 { // node 3 has not heard of ckpt.2
		if _, _, err := j.copies[i].Obtain(cache.Route{Name: "ckpt.2", Kind: cache.KindDir, Root: "ckpt.2"}); err != nil {
			t.Fatal(err)
		}
	}
	p := pathOwnedBy("config_", 1, 4)
	must(t, errOf(j.names[0].Create(ctx, "ckpt.2", p, file, false)))
	got, err := j.names[0].List(ctx, "ckpt.2", "")
	if err != nil || !slices.Equal(slices.Sorted(maps.Keys(got)), []string{p}) {
		t.Fatalf("list of a dataset node 3 has not heard of: %v, %v; want [%s]", slices.Sorted(maps.Keys(got)), err, p)
	}
}

// TestOwnerDownFails: a call whose owner does not answer fails after the
// member timeout, naming the node; it never hangs.
func TestOwnerDownFails(t *testing.T) {
	j := newJob(t, 3)
	j.net.Kill(2)
	p := pathOwnedBy("f", 2, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := j.names[0].Create(ctx, "ckpt.1", p, file, false)
	if err == nil || !strings.Contains(err.Error(), "node 2") {
		t.Fatalf("create owned by a node that is down: %v", err)
	}
}

func errOf(_ names.Entry, err error) error { return err }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestOwnerThatCannotSpeakFails: an owner whose run did not begin the
// dataset (its daemon restarted since, or it never held it) does not
// answer "no such entry": the call fails with EIO, naming it, after the
// owner had the member timeout to hear of the dataset.
func TestOwnerThatCannotSpeakFails(t *testing.T) {
	j := newJob(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	p := pathOwnedBy("f", 1, 3)
	_, err := j.names[0].Lookup(ctx, "ckpt.2", p) // no node began ckpt.2
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "node 1") {
		t.Fatalf("lookup in a dataset the owner never heard of: %v, want EIO naming node 1", err)
	}
	must(t, j.copies[1].Fail("ckpt.1", "its daemon restarted"))
	if _, err := j.names[0].Lookup(context.Background(), "ckpt.1", p); !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "restarted") {
		t.Fatalf("lookup owned by a node where the dataset failed: %v, want EIO with the reason", err)
	}
}
