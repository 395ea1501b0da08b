package files

import (
	"cmp"
	"fmt"
	"slices"
)

// A file that several nodes wrote (MPI-IO, parallel HDF5: rank 0 creates
// it, every rank writes its part) is one file of the dataset once it
// completes, but each node's cache holds only what was written there. A
// member that holds part of a file lists it Partial, with the byte Ranges
// it wrote: its copy reads as zeros everywhere else, and Size is the size
// its copy has (the file's size is the largest of the members'). A member
// that lists a file without Partial holds it whole — it wrote it through
// the kernel without the daemon seeing each write (passthrough), so zeros
// in it may be bytes it never wrote. package record says which member's
// bytes a reader sees where (record.View), package completion checks that
// the members agree where their ranges overlap.

// Range is a run of bytes of a file: Len bytes from Off.
type Range struct {
	Off int64 `json:"off"`
	Len int64 `json:"len"`
}

// End is the offset just past the range.
func (r Range) End() int64 { return r.Off + r.Len }

// String shows the range as a person reads it: "bytes 1048576–2097152".
func (r Range) String() string { return fmt.Sprintf("bytes %d–%d", r.Off, r.End()) }

// Held returns the ranges of m's file that the member holds: its Ranges
// when it is Partial, else the whole file.
func (m *Meta) Held() []Range {
	if m.Partial {
		return m.Ranges
	}
	if m.Size == 0 {
		return nil
	}
	return []Range{{0, m.Size}}
}

// HeldBytes is how many bytes of m's file the member holds: what its share
// costs, and what an encode reads of it.
func (m *Meta) HeldBytes() int64 {
	if !m.Partial {
		return m.Size
	}
	var n int64
	for _, r := range m.Ranges {
		n += r.Len
	}
	return n
}

// checkRanges validates a Partial file's ranges: sorted, apart (touching
// ranges are one), non-empty, within its size.
func checkRanges(m *Meta) error {
	var end int64
	for i, r := range m.Ranges {
		switch {
		case r.Off < 0 || r.Len <= 0 || r.Off > m.Size-r.Len:
			return fmt.Errorf("range %d (%d bytes at %d) outside a file of %d", i, r.Len, r.Off, m.Size)
		case i > 0 && r.Off <= end:
			return fmt.Errorf("range %d at %d overlaps or touches the one before, which ends at %d", i, r.Off, end)
		}
		end = r.End()
	}
	return nil
}

// Ranges is a set of byte ranges being built as writes arrive: kept
// sorted, apart, with touching or overlapping ones merged. Its zero value
// is empty. It is not safe for concurrent use.
type Ranges struct{ rs []Range }

// Add adds the n bytes at off.
func (s *Ranges) Add(off, n int64) {
	if n <= 0 {
		return
	}
	end := off + n
	// The first range that ends at or after off, and the first that
	// starts after end: those between merge with the new one.
	i, _ := slices.BinarySearchFunc(s.rs, off, func(r Range, off int64) int { return cmp.Compare(r.End(), off) })
	j := i
	for j < len(s.rs) && s.rs[j].Off <= end {
		off, end = min(off, s.rs[j].Off), max(end, s.rs[j].End())
		j++
	}
	s.rs = slices.Replace(s.rs, i, j, Range{off, end - off})
}

// Truncate drops what lies at or beyond size: the file was cut there.
func (s *Ranges) Truncate(size int64) {
	for i := len(s.rs) - 1; i >= 0; i-- {
		r := &s.rs[i]
		switch {
		case r.Off >= size:
			s.rs = s.rs[:i]
		case r.End() > size:
			r.Len = size - r.Off
			return
		default:
			return
		}
	}
}

// Missing returns the parts of r that are not in the set, in order.
func (s *Ranges) Missing(r Range) []Range {
	var out []Range
	at := r.Off
	for _, h := range s.rs {
		if h.End() <= at {
			continue
		}
		if h.Off >= r.End() {
			break
		}
		if h.Off > at {
			out = append(out, Range{at, h.Off - at})
		}
		at = max(at, h.End())
	}
	if at < r.End() {
		out = append(out, Range{at, r.End() - at})
	}
	return out
}

// Union adds every range of o.
func (s *Ranges) Union(o *Ranges) {
	for _, r := range o.rs {
		s.Add(r.Off, r.Len)
	}
}

// List returns the ranges, sorted and apart; the caller may keep it.
func (s *Ranges) List() []Range { return slices.Clone(s.rs) }

// Empty reports whether no byte was added.
func (s *Ranges) Empty() bool { return len(s.rs) == 0 }

// Overlap returns the runs of bytes that lie in both a and b, each sorted
// and apart.
func Overlap(a, b []Range) []Range {
	var out []Range
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].Off, b[j].Off), min(a[i].End(), b[j].End())
		if lo < hi {
			out = append(out, Range{lo, hi - lo})
		}
		if a[i].End() < b[j].End() {
			i++
		} else {
			j++
		}
	}
	return out
}
