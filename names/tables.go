package names

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/scrfs/scrfs/files"
)

// tables are the entries a node owns, by dataset and path inside it.
type tables struct {
	mu        sync.Mutex
	byDataset map[string]map[string]*Entry
}

// create records entry e at path rel of dataset ds, created by node from,
// and returns the entry as it now stands. A directory created again stays
// one directory (several ranks make the same one at once); a file created
// again gains a holder unless excl (exactly one exclusive create wins).
func (t *tables) create(ds, rel string, e Entry, excl bool, from int) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	paths := t.byDataset[ds]
	if paths == nil {
		paths = map[string]*Entry{}
		t.byDataset[ds] = paths
	}
	old := paths[rel]
	switch {
	case old == nil:
		e.Holders = []int{from}
		paths[rel] = &e
		return e, nil
	case old.Type != e.Type:
		return Entry{}, fmt.Errorf("%s/%s is a %s already: %w", ds, rel, old.Type, ErrExists)
	case excl && e.Type != files.Dir:
		return Entry{}, fmt.Errorf("%s/%s: %w", ds, rel, ErrExists)
	}
	addHolder(old, from)
	return copyEntry(old), nil
}

// lookup returns the entry at rel of ds, and counts node from among its
// holders: it makes its own copy of the name.
func (t *tables) lookup(ds, rel string, from int) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byDataset[ds][rel]
	if e == nil {
		return Entry{}, fmt.Errorf("%s/%s: %w", ds, rel, ErrNotFound)
	}
	addHolder(e, from)
	return copyEntry(e), nil
}

// remove takes the entry at rel of ds out of the table and returns it.
func (t *tables) remove(ds, rel string) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byDataset[ds][rel]
	if e == nil {
		return Entry{}, fmt.Errorf("%s/%s: %w", ds, rel, ErrNotFound)
	}
	delete(t.byDataset[ds], rel)
	return *e, nil
}

// put sets the entry at rel of ds to e (a rename's target), returning the
// entry it replaced, if any.
func (t *tables) put(ds, rel string, e Entry) (old *Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	paths := t.byDataset[ds]
	if paths == nil {
		paths = map[string]*Entry{}
		t.byDataset[ds] = paths
	}
	old = paths[rel]
	paths[rel] = &e
	return old
}

// list returns the entries of ds directly in directory dir ("" for the
// dataset's root), by name.
func (t *tables) list(ds, dir string) map[string]Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]Entry{}
	for rel, e := range t.byDataset[ds] {
		if parentOf(rel) == dir {
			out[path.Base(rel)] = copyEntry(e)
		}
	}
	return out
}

// peek returns the entry at rel of ds.
func (t *tables) peek(ds, rel string) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byDataset[ds][rel]
	if e == nil {
		return Entry{}, fmt.Errorf("%s/%s: %w", ds, rel, ErrNotFound)
	}
	return copyEntry(e), nil
}

// take removes and returns the entries of ds at dir and below it.
func (t *tables) take(ds, dir string) map[string]Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]Entry{}
	for rel, e := range t.byDataset[ds] {
		if rel == dir || strings.HasPrefix(rel, dir+"/") {
			out[rel] = *e
			delete(t.byDataset[ds], rel)
		}
	}
	return out
}

// drop forgets dataset ds.
func (t *tables) drop(ds string) {
	t.mu.Lock()
	delete(t.byDataset, ds)
	t.mu.Unlock()
}

// rename moves the entries of dataset from to dataset to.
func (t *tables) rename(from, to string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if paths, ok := t.byDataset[from]; ok {
		delete(t.byDataset, from)
		t.byDataset[to] = paths
	}
}

// parentOf returns the directory rel is in, "" for the dataset's root.
func parentOf(rel string) string {
	if d := path.Dir(rel); d != "." {
		return d
	}
	return ""
}

func addHolder(e *Entry, node int) {
	if !slices.Contains(e.Holders, node) {
		e.Holders = append(e.Holders, node)
	}
}

func copyEntry(e *Entry) Entry {
	c := *e
	c.Holders = slices.Clone(e.Holders)
	return c
}

// sortedNames returns the names of m, sorted.
func sortedNames(m map[string]Entry) []string { return slices.Sorted(maps.Keys(m)) }
