package prefix

import (
	"context"
	"testing"

	"github.com/scrfs/scrfs/layout"
)

// The index records where a dataset sat in the mount, so a fetch can put it
// back there; a malformed route must be refused like any other bad field.
func TestIndexEntryRoute(t *testing.T) {
	cases := []struct {
		kind, root string
		ok         bool
	}{
		{"", "", true},
		{layout.RouteDir, "ckpt.1", true},
		{layout.RouteDir, "runs/a/ckpt.1", true},
		{layout.RouteFlat, "", true},
		{layout.RouteFlat, "ckpts", true},
		{"", "ckpt.1", false},                    // root without kind
		{"file", "ckpt.1", false},                // unknown kind
		{layout.RouteDir, "", false},             // a directory dataset has a root
		{layout.RouteDir, "other", false},        // whose last component is its name
		{layout.RouteDir, "/abs/ckpt.1", false},  // relative
		{layout.RouteFlat, "../up", false},       // inside the mount
		{layout.RouteFlat, "a//b", false},        // clean
		{layout.RouteFlat, "a/./b", false},       // clean
		{layout.RouteDir, "x/../ckpt.1", false},  // clean
		{layout.RouteFlat, "..", false},          // inside the mount
		{layout.RouteFlat, "ok/../../x", false},  // clean
		{layout.RouteDir, "a/ckpt.1/", false},    // clean
		{layout.RouteFlat, "ckpts/sub", true},    // nested shared directory
		{layout.RouteDir, "ckpt.1/ckpt.1", true}, // the name may repeat above
	}
	for _, c := range cases {
		ix := emptyIndex()
		err := ix.Put(IndexEntry{Name: "ckpt.1", ID: 1, State: StateFlushing, Kind: c.kind, Root: c.root})
		if (err == nil) != c.ok {
			t.Errorf("kind %q root %q: err %v, want ok=%v", c.kind, c.root, err, c.ok)
		}
	}
}

func TestBeginFlushKeepsRoute(t *testing.T) {
	prefix := fastDir(t)
	ctx := context.Background()
	must(t, dirBeginFlush(ctx, prefix, IndexEntry{Name: "ckpt.1", ID: 7, Nodes: 2, Kind: layout.RouteFlat, Root: "ckpts",
		Files: 99, FailedFetches: []FetchFailure{{Node: 1}}}, nil))
	ix, err := dirReadIndex(prefix)
	must(t, err)
	e, ok := ix.Lookup("ckpt.1")
	if !ok || e.Kind != layout.RouteFlat || e.Root != "ckpts" || e.ID != 7 || e.Files != 0 || e.FailedFetches != nil {
		t.Fatalf("entry after BeginFlush: %+v", e)
	}
	// A route that does not validate leaves the index as it was.
	err = dirBeginFlush(ctx, prefix, IndexEntry{Name: "ckpt.2", ID: 8, Nodes: 2, Kind: layout.RouteDir, Root: "elsewhere"}, nil)
	if err == nil {
		t.Fatal("BeginFlush accepted a directory dataset rooted at another name")
	}
	if ix, _ := dirReadIndex(prefix); len(ix.Datasets) != 1 {
		t.Fatalf("index changed by a refused BeginFlush: %+v", ix.Datasets)
	}
}
