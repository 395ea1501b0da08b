package record

import (
	"cmp"
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
	// Writers counts the members that wrote this path.
	Writers int
	// Pieces are set for a regular file several members wrote: where
	// each of its bytes is read, in order (bytes in no piece read as
	// zeros). Meta is then the file's as one: the largest size and
	// latest time, the rest as the lowest node wrote it.
	Pieces []Piece
}

// Piece is a run of the bytes of a file several members wrote, read from
// one of them.
type Piece struct {
	files.Range
	Source
	// Alts hold the same bytes: the other members that wrote all of the
	// piece as its source did (byte by byte, or whole), whose bytes
	// completion found equal there. A reader turns to them while the
	// source's holder is away.
	Alts []Source
}

// Source is a member's copy of a file, and the node that holds it.
type Source struct {
	Member string
	Node   int
	Holder string
	Local  bool
}

// Shared reports whether e is a regular file several members wrote,
// read piece by piece.
func (e *Entry) Shared() bool { return e.Pieces != nil }

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
	shared   int
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
	var copies map[string][]copyOf // regular files several members wrote
	for _, m := range members {
		for i := range m.Files {
			f := &m.Files[i]
			p := f.Path
			if e := v.entries[p]; e != nil {
				e.Writers++
				if f.Type == files.Regular && e.Meta.Type == files.Regular {
					if copies == nil {
						copies = map[string][]copyOf{}
					}
					if copies[p] == nil {
						copies[p] = []copyOf{{Source{e.Member, e.Node, e.Holder, e.Local}, &e.Meta}}
					}
					copies[p] = append(copies[p], copyOf{Source{m.ID, m.Node, m.HeldBy(), m.HeldBy() == self}, f})
				}
				continue
			}
			v.entries[p] = &Entry{Path: p, Meta: *f, Member: m.ID, Node: m.Node, Holder: m.HeldBy(), Local: m.HeldBy() == self, Writers: 1}
			if p != "." {
				dir := path.Dir(p)
				v.children[dir] = append(v.children[dir], path.Base(p))
			}
		}
	}
	for p, cs := range copies {
		v.entries[p].join(cs)
		v.shared++
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

// SharedFiles counts the regular files several members wrote.
func (v *View) SharedFiles() int { return v.shared }

// FlushedBy returns the member that writes shared file e to the prefix as
// one file: the one whose pieces hold most of its bytes (the lowest node
// on a tie), so that most of what it writes is its own. Every node agrees,
// from the record alone, when the view was built for no node in
// particular (NewView(rec, "")).
func (v *View) FlushedBy(e *Entry) string {
	held := map[string]int64{}
	node := map[string]int{}
	for _, p := range e.Pieces {
		held[p.Member] += p.Len
		node[p.Member] = p.Node
	}
	best := e.Member // the lowest node's, which holds nothing if it wrote an empty copy
	for m, n := range held {
		if b := held[best]; n > b || n == b && node[m] < node[best] {
			best = m
		}
	}
	return best
}

// SharedEntries returns the regular files several members wrote, by path.
func (v *View) SharedEntries() []*Entry {
	var out []*Entry
	for _, e := range v.entries {
		if e.Shared() {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *Entry) int { return strings.Compare(a.Path, b.Path) })
	return out
}

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

// copyOf is one member's copy of a regular file several members wrote.
type copyOf struct {
	Source
	meta *files.Meta
}

// covers reports whether c wrote all of r.
func (c copyOf) covers(r files.Range) bool {
	for _, h := range c.meta.Held() {
		if h.Off <= r.Off && r.End() <= h.End() {
			return true
		}
	}
	return false
}

// join makes e the file its members' copies are together: each byte is
// read from a copy that holds it, one that lists it byte by byte (Partial)
// before one that holds the file whole, since completion let a whole copy
// differ from a partial one only by zeros it may never have written
// (package completion, shared.go); among those alike this node's own,
// then the lowest node's. Its metadata is the lowest node's, with the
// largest size and latest time.
func (e *Entry) join(cs []copyOf) {
	byNode := slices.Clone(cs)
	slices.SortFunc(byNode, func(a, b copyOf) int { return a.Node - b.Node })
	meta := *byNode[0].meta
	meta.Partial, meta.Ranges, meta.HasCRC, meta.CRC32C = false, nil, false, 0
	for _, c := range cs {
		meta.Size, meta.MtimeNs = max(meta.Size, c.meta.Size), max(meta.MtimeNs, c.meta.MtimeNs)
	}
	slices.SortStableFunc(cs, func(a, b copyOf) int {
		switch {
		case a.meta.Partial != b.meta.Partial && a.meta.Partial:
			return -1
		case a.meta.Partial != b.meta.Partial:
			return 1
		case a.Local != b.Local && a.Local:
			return -1
		case a.Local != b.Local:
			return 1
		}
		return a.Node - b.Node
	})
	var covered files.Ranges
	pieces := []Piece{}
	for _, c := range cs {
		for _, r := range c.meta.Held() {
			for _, free := range covered.Missing(r) {
				p := Piece{Range: free, Source: c.Source}
				for _, o := range cs {
					if o.Member != c.Member && o.meta.Partial == c.meta.Partial && o.covers(free) {
						p.Alts = append(p.Alts, o.Source)
					}
				}
				pieces = append(pieces, p)
			}
			covered.Add(r.Off, r.Len)
		}
	}
	slices.SortFunc(pieces, func(a, b Piece) int { return cmp.Compare(a.Off, b.Off) })
	*e = Entry{Path: e.Path, Meta: meta, Member: byNode[0].Member, Node: byNode[0].Node, Holder: byNode[0].Holder,
		Writers: e.Writers, Pieces: pieces}
}

func clean(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}
