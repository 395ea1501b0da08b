package layout

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// ParseDomains parses the failure domain of every node, one string per node
// in node-index order, e.g. "rack1/enc2": components separated by '/',
// outermost first; the node itself is the implicit leaf and is not written.
// Surrounding whitespace is trimmed. Components must be non-empty and free of
// whitespace and control characters.
//
// All nodes of a job must name the same number of levels; mixed depths are an
// error wrapping ErrDomain, as is a malformed entry (named by its 0-based
// position). An empty names list returns nil: every node is its own failure
// domain. An entry "" is the empty path, which is only valid when every entry
// is empty.
func ParseDomains(names []string) ([][]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	out := make([][]string, len(names))
	depth := -1
	for i, name := range names {
		d, err := parseDomain(name)
		if err != nil {
			return nil, fmt.Errorf("failure domain %d: %w", i, err)
		}
		if depth >= 0 && len(d) != depth {
			return nil, fmt.Errorf("%w: failure domain %d %q has %d levels, domain 0 %q has %d: every node needs the same depth",
				ErrDomain, i, short(name), len(d), short(names[0]), depth)
		}
		depth = len(d)
		out[i] = d
	}
	return out, nil
}

func parseDomain(name string) ([]string, error) {
	s := strings.TrimSpace(name)
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, "/")
	for _, p := range parts {
		if err := checkDomainComponent(p); err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrDomain, short(name), err)
		}
	}
	return parts, nil
}

func checkDomainComponent(p string) error {
	if p == "" {
		return fmt.Errorf("empty component")
	}
	if strings.Contains(p, "/") {
		return fmt.Errorf("component %q contains '/'", short(p))
	}
	for _, r := range p {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("component %q contains whitespace or a control character", short(p))
		}
	}
	return nil
}

// NewNodes returns the nodes 0..n-1 with their failure domains, ready for
// Build. domains is nil (every node its own domain) or has exactly n entries,
// as ParseDomains returns them; the paths are shared, not copied.
func NewNodes(n int, domains [][]string) ([]Node, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: a job needs at least one node, got %d", ErrNodes, n)
	}
	if domains != nil && len(domains) != n {
		return nil, fmt.Errorf("%w: %d failure domains for %d nodes: give one per node or none", ErrDomain, len(domains), n)
	}
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i].Index = i
		if domains != nil {
			nodes[i].Domain = domains[i]
		}
	}
	return nodes, nil
}

// domainKey names a node's domain at level l (1-based, outermost first) so
// that two nodes share it exactly when their keys are equal. A node whose
// path is shorter than l (never the case after Build's checks, but Tolerance
// takes nodes as given) is a domain of its own.
func domainKey(n Node, l int) string {
	if l > len(n.Domain) {
		return fmt.Sprintf("\x00node%d", n.Index)
	}
	return strings.Join(n.Domain[:l], "/")
}

// levelNames names the failure-domain levels for reports, outermost first,
// followed by "node". A level is named by the common alphabetic stem of its
// components when there is one ("rack1", "rack2" -> "rack"), else "level<i>".
func levelNames(nodes []Node, depth int) []string {
	names := make([]string, 0, depth+1)
	for l := 0; l < depth; l++ {
		stem := ""
		ok := true
		for _, n := range nodes {
			if l >= len(n.Domain) {
				continue
			}
			s := strings.TrimRightFunc(n.Domain[l], func(r rune) bool {
				return r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
			})
			if s == "" || stem != "" && s != stem {
				ok = false
				break
			}
			stem = s
		}
		if !ok || stem == "" || stem == "node" || slices.Contains(names, stem) {
			stem = fmt.Sprintf("level%d", l+1)
		}
		names = append(names, stem)
	}
	return append(names, "node")
}
