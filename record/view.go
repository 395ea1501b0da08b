package record

import (
	"path"
	"slices"
	"strings"

	"github.com/scrfs/scrfs/files"
)

// Entry is one entry of a dataset's view: a file, directory or symlink,
// with the metadata its writer gave it, and where its bytes are.
type Entry struct {
	Path string // relative to the dataset's root, "." for the root itself
	Meta files.Meta
	// Member is the identity of the member whose copy this node sees,
	// Node the index of the node that wrote it, Holder the identity of
	// the node that holds that share now.
	Member string
	Node   int
	Holder string
	// Local is set when this node holds the copy itself.
	Local bool
	// Writers counts the members that wrote this path (more than one
	// for a regular file or symlink is a clash).
	Writers int
}

// View is a recorded dataset as one node sees it: the union of the
// members' trees, answered from the record alone. It is read-only once
// built and safe for concurrent use.
type View struct {
	Dataset string
	Seq     uint64
	Rev     int
	// Record is the record the view was built from; it must not be
	// changed.
	Record   *Record
	entries  map[string]*Entry
	children map[string][]string // directory → names, sorted
	clashes  int
}

// NewView builds the view of rec for the node whose identity is self.
func NewView(rec *Record, self string) *View {
	v := &View{Dataset: rec.Dataset, Seq: rec.Seq, Rev: rec.Rev, Record: rec, entries: map[string]*Entry{},
		children: map[string][]string{}}
	// Own share first, then by node index: the first copy of a path wins.
	members := make([]*Member, 0, len(rec.Members))
	for i := range rec.Members {
		members = append(members, &rec.Members[i])
	}
	slices.SortStableFunc(members, func(a, b *Member) int {
		switch {
		case a.HeldBy() == self:
			return -1
		case b.HeldBy() == self:
			return 1
		}
		return a.Node - b.Node
	})
	for _, m := range members {
		for _, f := range m.Files {
			p := f.Path
			if e := v.entries[p]; e != nil {
				e.Writers++
				if e.Writers == 2 && f.Type != files.Dir {
					v.clashes++
				}
				continue
			}
			v.entries[p] = &Entry{Path: p, Meta: f, Member: m.ID, Node: m.Node, Holder: m.HeldBy(), Local: m.HeldBy() == self, Writers: 1}
			if p != "." {
				dir := path.Dir(p)
				v.children[dir] = append(v.children[dir], path.Base(p))
			}
		}
	}
	if v.entries["."] == nil {
		v.entries["."] = &Entry{Path: ".", Meta: files.Meta{Path: ".", Type: files.Dir, Mode: 0o755}, Writers: 0}
	}
	for _, names := range v.children {
		slices.Sort(names)
	}
	return v
}

// RootMode returns the mode of rec's dataset directory as every mount
// shows it (the first member's, by node index; 0755 if none listed it),
// for a node that makes the directory without one of its own.
func (r *Record) RootMode() uint32 {
	e, _ := NewView(r, "").Lookup(".")
	return e.Meta.Mode & 0o7777
}

// Lookup returns the entry at path p ("" or "." for the root).
func (v *View) Lookup(p string) (*Entry, bool) {
	e, ok := v.entries[clean(p)]
	return e, ok
}

// ReadDir returns the entries of directory p, sorted by name.
func (v *View) ReadDir(p string) []*Entry {
	dir := clean(p)
	names := v.children[dir]
	out := make([]*Entry, 0, len(names))
	for _, n := range names {
		out = append(out, v.entries[path.Join(dir, n)])
	}
	return out
}

// Clashes counts the paths (files and symlinks) more than one member
// wrote.
func (v *View) Clashes() int { return v.clashes }

// Files returns how many regular files the view shows and their bytes.
func (v *View) Files() (count, bytes int64) {
	for _, e := range v.entries {
		if e.Meta.Type == files.Regular || e.Meta.Type == files.HardLink {
			count++
			bytes += e.Meta.Size
		}
	}
	return count, bytes
}

// Len is the number of entries, the root included.
func (v *View) Len() int { return len(v.entries) }

func clean(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}
