package cache

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// names returns the names of ds.
func names(ds []*Dataset) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name())
	}
	return out
}

// TestKeptDataset: a recorded dataset that cannot be rebuilt fails with
// its files kept: gone from what is served, listed with the failures,
// still there after a restart, not counted against the cache size, served
// again once revived; only a dataset of its name written again replaces
// it.
func TestKeptDataset(t *testing.T) {
	ts := newTestStore(t, Rules{}, 2)
	ts.recordDataset(t, "c1", 1000, 1)
	files := filepath.Join(ts.CacheDir(), "c1", "sub/dir/g")
	must(t, ts.Keep("c1", "cannot be rebuilt: lost 2 members"))
	if ts.Get("c1") != nil || len(ts.Datasets()) != 0 || !slices.Equal(names(ts.Kept()), []string{"c1"}) {
		t.Fatalf("after Keep: served %v, kept %v", names(ts.Datasets()), names(ts.Kept()))
	}
	if f := ts.Failures(); len(f) != 1 || f[0].Name != "c1" || !f[0].Kept || f[0].State != Failed || f[0].Seq != 1 {
		t.Fatalf("failures %+v, want c1 kept", f)
	}
	if ts.removes[len(ts.removes)-1] != "c1" {
		t.Errorf("removals %v: the mount and the protocols must hear that c1 left", ts.removes)
	}
	// Newer datasets do not evict it, and it does not evict them.
	ts.recordDataset(t, "c2", 10, 2)
	ts.recordDataset(t, "c3", 10, 3)
	ts.reopen(t)
	if _, err := os.Stat(files); err != nil || !slices.Equal(names(ts.Kept()), []string{"c1"}) {
		t.Fatalf("after a restart: kept %v, files %v", names(ts.Kept()), err)
	}
	if got := names(ts.Datasets()); !slices.Equal(got, []string{"c2", "c3"}) {
		t.Fatalf("served %v, want c2 and c3", got)
	}
	must(t, ts.Revive("c1", Degraded, "its members are back"))
	// Served again, it counts against the cache size of 2: as the oldest,
	// it goes at once.
	if ts.Get("c1") != nil || len(ts.Kept()) != 0 || ts.removes[len(ts.removes)-1] != "c1" {
		t.Fatalf("after Revive: served %v, kept %v", names(ts.Datasets()), names(ts.Kept()))
	}
	ts.recordDataset(t, "c4", 10, 4)
	must(t, ts.Keep("c4", "cannot be rebuilt"))
	must(t, ts.Revive("c4", Degraded, "its members are back"))
	if d := ts.Get("c4"); d == nil || d.State() != Degraded || len(ts.Kept()) != 0 {
		t.Fatalf("after Revive: c4 %v, kept %v", d, names(ts.Kept()))
	}
}

// TestKeptReplacedBySameName: writing (or fetching) a dataset of a kept
// one's name replaces the kept copy and its failure row.
func TestKeptReplacedBySameName(t *testing.T) {
	ts := newTestStore(t, Rules{}, 4)
	ts.recordDataset(t, "c1", 1000, 1)
	must(t, ts.Keep("c1", "cannot be rebuilt"))
	d := ts.write(t, "c1", "new", 3)
	if len(ts.Kept()) != 0 || len(ts.Failures()) != 0 {
		t.Fatalf("kept %v, failures %+v after c1 was written again", names(ts.Kept()), ts.Failures())
	}
	if ents, _ := os.ReadDir(d.Dir()); len(ents) != 1 || ents[0].Name() != "new" {
		t.Fatalf("the new c1 holds %v, want only its own file", ents)
	}
	if err := ts.Revive("c1", Protected, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revive of the replaced copy: %v", err)
	}
}

// TestKeptEvictedWhenSpaceIsNeeded: a writer's ENOSPC evicts the oldest
// kept dataset, with a log line, and nothing else.
func TestKeptEvictedWhenSpaceIsNeeded(t *testing.T) {
	ts := newTestStore(t, Rules{}, 4)
	ts.recordDataset(t, "c1", 1000, 1)
	ts.recordDataset(t, "c2", 1000, 2)
	ts.recordDataset(t, "c3", 1000, 3)
	must(t, ts.Keep("c2", "cannot be rebuilt"))
	must(t, ts.Keep("c1", "cannot be rebuilt"))
	if !ts.NeedSpace() || !slices.Equal(names(ts.Kept()), []string{"c2"}) || ts.Get("c3") == nil {
		t.Fatalf("after NeedSpace: kept %v, served %v; want c1, the oldest, gone", names(ts.Kept()), names(ts.Datasets()))
	}
	if !ts.NeedSpace() || ts.NeedSpace() || len(ts.Kept()) != 0 || ts.Get("c3") == nil {
		t.Fatalf("kept %v, served %v", names(ts.Kept()), names(ts.Datasets()))
	}
	if f := ts.Failures(); len(f) != 0 {
		t.Errorf("failures %+v after the kept ones went", f)
	}
}

// TestDatasetsInJobOrder: a node that adopts datasets newest first (a
// rebuild) lists them oldest first by their records, as every node does.
func TestDatasetsInJobOrder(t *testing.T) {
	ts := newTestStore(t, Rules{}, 4)
	at := time.Now().UTC()
	for _, c := range []recorded{{"c2", 2, at.Add(time.Second)}, {"c1", 1, at}} {
		staged := filepath.Join(t.TempDir(), c.name)
		must(t, os.MkdirAll(staged, 0o700))
		if _, err := ts.Adopt(Route{Name: c.name, Kind: KindDir, Root: c.name}, Protected, staged, c.seq, c.completed); err != nil {
			t.Fatal(err)
		}
	}
	ts.write(t, "c3", "f", 1)
	if got := names(ts.Datasets()); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Fatalf("datasets %v, want c1, c2 (by their records), then c3 (being written)", got)
	}
}

// TestOneFailureRowPerName: a dataset that fails twice shows once, with
// the later reason.
func TestOneFailureRowPerName(t *testing.T) {
	ts := newTestStore(t, Rules{}, 4)
	r := Route{Name: "c1", Kind: KindDir, Root: "c1"}
	must(t, ts.NoteFailed(r, "first"))
	must(t, ts.NoteFailed(r, "second"))
	if f := ts.Failures(); len(f) != 1 || !strings.Contains(f[0].Reason, "second") {
		t.Fatalf("failures %+v", f)
	}
}
