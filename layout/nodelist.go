package layout

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxNodelistHosts caps how many host names ExpandNodelist produces. A real
// job list is far smaller; the cap turns a typo such as n[0-999999999] into an
// error instead of an out-of-memory kill on every node of the job.
const MaxNodelistHosts = 1 << 20

// maxNodelistBytes caps the total length of the expanded names for the same
// reason: 1<<20 names of 255 bytes would still be a quarter gigabyte.
const maxNodelistBytes = 32 << 20

// maxHostLen is the longest host name accepted anywhere in this package (the
// DNS limit is 253; 255 leaves room for a trailing dot).
const maxHostLen = 255

// ExpandNodelist expands a Slurm compressed host list, as found in
// SLURM_JOB_NODELIST, into one host name per node, in Slurm's order.
//
// Elements are separated by commas outside brackets; whitespace around an
// element is ignored. Inside brackets, a comma-separated list of numbers and
// ascending ranges lo-hi is substituted; numbers are zero padded to the width
// the range's start is written with (node[08-10] gives node08 node09 node10).
// An element may hold several bracket groups (rack[1-2]-n[1-2]); the result is
// their cartesian product in the order Slurm's hostlist_create produces: the
// last group varies fastest, then the first, second, ... group, which for two
// groups is plain row-major order. Text after the last group is allowed
// (n[1-2].ib), which Slurm itself rejects.
//
// Host names may contain letters, digits, '.', '-' and '_' and are at most 255
// bytes. Duplicates are kept as written; NormalizeAddrs rejects them. An empty
// list, an empty element, unbalanced or nested brackets, a descending range, a
// non-numeric range or more than MaxNodelistHosts names is an error wrapping
// ErrNodelist.
func ExpandNodelist(s string) ([]string, error) {
	return expandNodelist(s, MaxNodelistHosts, maxNodelistBytes)
}

// nlGroup is one bracket group: its numbers, already formatted with padding.
type nlGroup struct {
	ranges []nlRange
	size   uint64
}

// nlRange is one lo-hi range of a bracket group; width is the zero-padded
// width taken from how lo was written.
type nlRange struct {
	lo, hi uint64
	width  int
}

// nlElement is a parsed element: lits[i] precedes groups[i], and the final
// literal follows the last group, so len(lits) == len(groups)+1.
type nlElement struct {
	lits   []string
	groups []nlGroup
}

func expandNodelist(s string, maxHosts int, maxBytes int) ([]string, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrNodelist, short(s), fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(s) == "" {
		return nil, fail("empty")
	}
	elems, err := splitNodelist(s)
	if err != nil {
		return nil, fail("%v", err)
	}
	// Count first, expand second: nothing is allocated for a list that would
	// exceed the caps.
	parsed := make([]nlElement, 0, len(elems))
	var total, bytes uint64
	for i, e := range elems {
		if e == "" {
			return nil, fail("element %d is empty", i+1)
		}
		pe, err := parseNodelistElement(e)
		if err != nil {
			return nil, fail("element %q: %v", short(e), err)
		}
		n := uint64(1)
		nameLen := uint64(0)
		for _, l := range pe.lits {
			nameLen += uint64(len(l))
		}
		for _, g := range pe.groups {
			if g.size > uint64(maxHosts)/n {
				return nil, fail("element %q expands to more than %d hosts", short(e), maxHosts)
			}
			n *= g.size
			nameLen += uint64(g.maxWidth())
		}
		total += n
		if total > uint64(maxHosts) {
			return nil, fail("expands to more than %d hosts", maxHosts)
		}
		// nameLen is at most a few KiB per group (bounded by the input), so
		// the product cannot overflow with n <= maxHosts.
		bytes += n * nameLen
		if bytes > uint64(maxBytes) {
			return nil, fail("expands to more than %d bytes of host names", maxBytes)
		}
		parsed = append(parsed, pe)
	}
	out := make([]string, 0, total)
	var sb strings.Builder
	for _, pe := range parsed {
		var err error
		out, err = pe.expand(out, &sb)
		if err != nil {
			return nil, fail("%v", err)
		}
	}
	return out, nil
}

// splitNodelist cuts s at the commas that are outside brackets and trims each
// piece, checking bracket balance on the way.
func splitNodelist(s string) ([]string, error) {
	var elems []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if depth > 0 {
				return nil, fmt.Errorf("nested '[' at offset %d", i)
			}
			depth++
		case ']':
			if depth == 0 {
				return nil, fmt.Errorf("unbalanced ']' at offset %d", i)
			}
			depth--
		case ',':
			if depth == 0 {
				elems = append(elems, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced '[': missing ']'")
	}
	return append(elems, strings.TrimSpace(s[start:])), nil
}

// parseNodelistElement parses one comma-free element such as rack[1-2]-n[01-04].
func parseNodelistElement(e string) (nlElement, error) {
	var pe nlElement
	rest := e
	for {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			break
		}
		// splitNodelist guarantees a matching ']' and no nesting.
		closeAt := open + strings.IndexByte(rest[open:], ']')
		lit := rest[:open]
		if err := checkHostChars(lit); err != nil {
			return pe, err
		}
		g, err := parseNodelistGroup(rest[open+1 : closeAt])
		if err != nil {
			return pe, err
		}
		pe.lits = append(pe.lits, lit)
		pe.groups = append(pe.groups, g)
		rest = rest[closeAt+1:]
	}
	if err := checkHostChars(rest); err != nil {
		return pe, err
	}
	pe.lits = append(pe.lits, rest)
	return pe, nil
}

// parseNodelistGroup parses the inside of one bracket pair: "01-04,07".
func parseNodelistGroup(body string) (nlGroup, error) {
	var g nlGroup
	for _, item := range strings.Split(body, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return g, fmt.Errorf("empty range in [%s]", body)
		}
		loStr, hiStr, isRange := strings.Cut(item, "-")
		if isRange && (loStr == "" || hiStr == "") {
			return g, fmt.Errorf("range %q needs a start and an end", item)
		}
		lo, err := parseNodelistNumber(loStr)
		if err != nil {
			return g, err
		}
		hi := lo
		if isRange {
			if hi, err = parseNodelistNumber(hiStr); err != nil {
				return g, err
			}
			if hi < lo {
				return g, fmt.Errorf("descending range %s", item)
			}
		}
		size := hi - lo + 1
		if size == 0 || g.size+size < g.size { // wrapped around uint64
			return g, fmt.Errorf("range %s is too large", item)
		}
		g.size += size
		g.ranges = append(g.ranges, nlRange{lo: lo, hi: hi, width: len(loStr)})
	}
	return g, nil
}

func parseNodelistNumber(s string) (uint64, error) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a number", s)
		}
	}
	if len(s) > 18 { // keeps hi-lo+1 and the padding far from overflow
		return 0, fmt.Errorf("number %s is too large", s)
	}
	return strconv.ParseUint(s, 10, 64)
}

// maxWidth is the longest number the group can produce.
func (g nlGroup) maxWidth() int {
	w := 0
	for _, r := range g.ranges {
		w = max(w, r.width, decimalLen(r.hi))
	}
	return w
}

// at appends the i-th number of the group (0 <= i < g.size), zero padded to
// its range's width, to buf.
func (g nlGroup) at(i uint64, buf []byte) []byte {
	for _, r := range g.ranges {
		if n := r.hi - r.lo + 1; i >= n {
			i -= n
			continue
		}
		v := r.lo + i
		for pad := r.width - decimalLen(v); pad > 0; pad-- {
			buf = append(buf, '0')
		}
		return strconv.AppendUint(buf, v, 10)
	}
	return buf // unreachable for i < g.size
}

func decimalLen(v uint64) int {
	n := 1
	for ; v >= 10; v /= 10 {
		n++
	}
	return n
}

// expand appends the element's host names to out in Slurm's order.
func (pe nlElement) expand(out []string, sb *strings.Builder) ([]string, error) {
	m := len(pe.groups)
	if m == 0 {
		if err := checkHostLen(pe.lits[0]); err != nil {
			return out, err
		}
		return append(out, pe.lits[0]), nil
	}
	// order lists the groups from fastest- to slowest-varying: the last
	// group, then the first, second, ... (see ExpandNodelist).
	order := make([]int, 0, m)
	order = append(order, m-1)
	for i := 0; i < m-1; i++ {
		order = append(order, i)
	}
	idx := make([]uint64, m)
	var num []byte
	for {
		sb.Reset()
		for i, g := range pe.groups {
			sb.WriteString(pe.lits[i])
			num = g.at(idx[i], num[:0])
			sb.Write(num)
		}
		sb.WriteString(pe.lits[m])
		name := sb.String()
		if err := checkHostLen(name); err != nil {
			return out, err
		}
		out = append(out, name)
		// Advance the odometer.
		k := 0
		for ; k < m; k++ {
			gi := order[k]
			idx[gi]++
			if idx[gi] < pe.groups[gi].size {
				break
			}
			idx[gi] = 0
		}
		if k == m {
			return out, nil
		}
	}
}

func checkHostLen(name string) error {
	if len(name) > maxHostLen {
		return fmt.Errorf("host name %q is longer than %d bytes", short(name), maxHostLen)
	}
	return nil
}

// checkHostChars accepts the characters of DNS and Slurm node names.
func checkHostChars(s string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' {
			continue
		}
		return fmt.Errorf("invalid character %q in host name", rune(c))
	}
	return nil
}

// short keeps error messages readable when the input is huge.
func short(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
