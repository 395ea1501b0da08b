package layout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Node is one node of a job as the layout sees it.
type Node struct {
	// Index is the node's 0-based index in the job's node list.
	Index int `json:"index"`
	// Domain is the node's failure-domain path, outermost first
	// (["rack1", "enc2"]); empty when every node is its own domain.
	Domain []string `json:"domain,omitempty"`
}

// Set is one redundancy set.
type Set struct {
	// ID is the set's 0-based id (redset's group id).
	ID int `json:"id"`
	// Members are node indices in member-rank order: Members[r] is rank r.
	// Rank r's ring neighbours are r-1 and r+1 modulo len(Members).
	Members []int `json:"members"`
}

// Layout is the assignment of a job's nodes to redundancy sets. It is
// computed by Build and read-only afterwards, so it may be shared between
// goroutines.
type Layout struct {
	// Sets are indexed by their ID.
	Sets []Set `json:"sets"`
	// Warnings name the sets that could not keep all members in distinct
	// failure domains.
	Warnings []string `json:"warnings,omitempty"`

	// where maps a node index to its set and rank; nil for a Layout that
	// was not made by Build (Find then scans).
	where map[int][2]int
}

// Build forms the redundancy sets of a job with SCR/redset semantics, the same
// on every node for the same input.
//
// nodes lists every node of the job with its failure domain; indices must be
// distinct and non-negative, and all domains must have the same depth. The
// job gets G = max(1, len(nodes)/setSize) sets whose sizes differ by at most
// one, so no set is smaller than setSize unless the whole job is: leftover
// nodes join other sets instead of forming a set of one that nothing protects.
// setSize must be at least 1 (1 makes every node a set of its own, for SINGLE).
//
// Members are spread over failure domains: nodes are ordered by domain path
// and index and dealt round-robin into the G sets, so each domain, at every
// level of the tree, puts floor or ceil of (its nodes / G) into each set.
// Racks are thus spread before enclosures, and a set only gets two members of
// one domain when that domain has more than G nodes; each such case adds a
// Warnings entry naming the set, the domain and the members. Inside a set,
// members are ordered so that ring neighbours (ranks r and r+1 mod p, used by
// XOR and PARTNER) are in different domains whenever possible, preferring
// distinct outermost domains, and so that same-domain members sit as far
// apart on the ring as possible, which helps PARTNER with several replicas.
//
// nodes is not modified or retained.
func Build(nodes []Node, setSize int) (*Layout, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: a job needs at least one node", ErrNodes)
	}
	if setSize < 1 {
		return nil, fmt.Errorf("%w: set size %d must be at least 1", ErrNodes, setSize)
	}
	depth, err := checkNodes(nodes)
	if err != nil {
		return nil, err
	}
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b Node) int {
		if c := slices.Compare(a.Domain, b.Domain); c != 0 {
			return c
		}
		return cmp.Compare(a.Index, b.Index)
	})
	g := max(1, len(nodes)/setSize)
	groups := make([][]Node, g)
	for i, n := range sorted {
		groups[i%g] = append(groups[i%g], n)
	}
	l := &Layout{Sets: make([]Set, g), where: make(map[int][2]int, len(nodes))}
	for id, members := range groups {
		ring := arrangeRing(members, depth)
		set := Set{ID: id, Members: make([]int, len(ring))}
		for r, n := range ring {
			set.Members[r] = n.Index
			l.where[n.Index] = [2]int{id, r}
		}
		l.Sets[id] = set
		l.Warnings = append(l.Warnings, sharedDomainWarnings(id, ring, depth)...)
	}
	return l, nil
}

// checkNodes validates Build's input and returns the common domain depth.
func checkNodes(nodes []Node) (int, error) {
	seen := make(map[int]bool, len(nodes))
	depth := len(nodes[0].Domain)
	for _, n := range nodes {
		if n.Index < 0 {
			return 0, fmt.Errorf("%w: negative node index %d", ErrNodes, n.Index)
		}
		if seen[n.Index] {
			return 0, fmt.Errorf("%w: node index %d appears twice", ErrNodes, n.Index)
		}
		seen[n.Index] = true
		if len(n.Domain) != depth {
			return 0, fmt.Errorf("%w: node %d has %d failure-domain levels, node %d has %d: every node needs the same depth",
				ErrDomain, n.Index, len(n.Domain), nodes[0].Index, depth)
		}
		for _, c := range n.Domain {
			if err := checkDomainComponent(c); err != nil {
				return 0, fmt.Errorf("%w: node %d: %v", ErrDomain, n.Index, err)
			}
		}
	}
	return depth, nil
}

// sharedDomainWarnings reports, for every level from the outermost in, each
// domain holding two or more members of the set.
func sharedDomainWarnings(id int, ring []Node, depth int) []string {
	var warns []string
	for l := 1; l <= depth; l++ {
		byDomain := make(map[string][]int)
		var order []string
		for _, n := range ring {
			k := domainKey(n, l)
			if _, ok := byDomain[k]; !ok {
				order = append(order, k)
			}
			byDomain[k] = append(byDomain[k], n.Index)
		}
		slices.Sort(order)
		for _, k := range order {
			idx := byDomain[k]
			if len(idx) < 2 {
				continue
			}
			slices.Sort(idx)
			warns = append(warns, fmt.Sprintf("set %d: nodes %s share failure domain %s", id, joinAnd(idx), k))
		}
	}
	return warns
}

// joinAnd writes 1, 2 and 3.
func joinAnd(idx []int) string {
	var b strings.Builder
	for i, v := range idx {
		switch {
		case i == 0:
		case i == len(idx)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d", v)
	}
	return b.String()
}

// Find returns the set that holds node and the node's rank in it, or
// (nil, -1) when node is not part of the layout. The returned set belongs to
// the layout and must not be modified.
func (l *Layout) Find(node int) (set *Set, rank int) {
	if l == nil {
		return nil, -1
	}
	if l.where != nil {
		if w, ok := l.where[node]; ok && w[0] < len(l.Sets) {
			return &l.Sets[w[0]], w[1]
		}
		return nil, -1
	}
	for i := range l.Sets {
		if r := slices.Index(l.Sets[i].Members, node); r >= 0 {
			return &l.Sets[i], r
		}
	}
	return nil, -1
}

// MinSetSize returns the number of members of the smallest set (0 for an
// empty layout): the size that bounds PARTNER replicas and RS parity.
func (l *Layout) MinSetSize() int {
	if l == nil || len(l.Sets) == 0 {
		return 0
	}
	m := len(l.Sets[0].Members)
	for _, s := range l.Sets[1:] {
		m = min(m, len(s.Members))
	}
	return m
}

// MaxSetSize returns the number of members of the largest set (0 for an empty
// layout): the size that bounds RS's p + k <= 256.
func (l *Layout) MaxSetSize() int {
	m := 0
	if l != nil {
		for _, s := range l.Sets {
			m = max(m, len(s.Members))
		}
	}
	return m
}
