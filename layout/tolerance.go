package layout

import (
	"slices"
	"strings"
)

// Report says how many failures a layout survives under a scheme, per set and
// per level of the failure-domain tree. It marshals to JSON with the field
// names below, which are a stable interface (scrfs layout --json).
type Report struct {
	// Scheme is the scheme the report was computed for.
	Scheme Scheme `json:"scheme"`
	// Nodes is the number of nodes in the layout.
	Nodes int `json:"nodes"`
	// Levels names the failure-domain levels, outermost first, ending with
	// "node" (e.g. ["rack", "enc", "node"]).
	Levels []string `json:"levels"`
	// Sets has one entry per set, by set ID.
	Sets []SetReport `json:"sets"`
	// Tolerance[i] is how many whole domains of level Levels[i] may fail at
	// once, anywhere in the job, without losing data: the minimum over sets.
	Tolerance []int `json:"tolerance"`
	// Warnings are the layout's warnings (see Layout.Warnings).
	Warnings []string `json:"warnings,omitempty"`
	// Problem is CheckScheme's complaint when the scheme does not fit the
	// sets; the numbers are then computed with the parameters clamped to
	// what the sets allow, and the job would not start.
	Problem string `json:"problem,omitempty"`
}

// SetReport is one set's line of a Report.
type SetReport struct {
	// ID is the set's ID.
	ID int `json:"id"`
	// Members are node indices in rank order.
	Members []int `json:"members"`
	// Domains are the members' failure-domain paths ("rack1/enc2"), in
	// rank order; empty strings when nodes have no domains.
	Domains []string `json:"domains"`
	// Holders[r], for PARTNER, are the node indices that keep copies of
	// rank r's files; for XOR and RS, the nodes that keep a copy of rank
	// r's file metadata. Nil for SINGLE.
	Holders [][]int `json:"holders,omitempty"`
	// Failures is how many members the set may lose without losing data:
	// single 0, partner r, xor 1, rs k.
	Failures int `json:"failures"`
	// Tolerance[i] is how many whole domains of level Report.Levels[i] the
	// set survives losing at once.
	Tolerance []int `json:"tolerance"`
}

// Tolerance computes how many failures layout l survives under scheme s.
//
// For each set: the member failures it survives (SINGLE 0; PARTNER r, since a
// member's data is lost only with the member and all its r holders; XOR 1;
// RS k). For each level of the failure-domain tree, outermost first and then
// "node": how many simultaneous failures of whole domains at that level the
// set always survives. For XOR and RS that is the largest f such that the f
// largest per-domain member counts of the set sum to at most the set's
// tolerance; for PARTNER it is, minimised over members, the number of
// distinct domains among the member and its holders, minus one. The job's
// tolerance per level is the minimum over sets.
//
// nodes gives the failure domains (matched by Index; a node missing from it
// counts as a domain of its own). l and nodes are not modified. A scheme that
// does not fit the sets is reported in Problem, never as a panic.
func Tolerance(l *Layout, nodes []Node, s Scheme) Report {
	rep := Report{Scheme: s}
	if l == nil {
		rep.Problem = "no layout"
		rep.Levels = []string{"node"}
		rep.Tolerance = []int{0}
		return rep
	}
	byIndex := make(map[int]Node, len(nodes))
	depth := 0
	for _, n := range nodes {
		byIndex[n.Index] = n
		depth = max(depth, len(n.Domain))
	}
	if err := l.CheckScheme(s); err != nil {
		rep.Problem = err.Error()
	}
	rep.Levels = levelNames(nodes, depth)
	rep.Warnings = slices.Clone(l.Warnings)
	rep.Tolerance = make([]int, depth+1)
	for i := range rep.Tolerance {
		rep.Tolerance[i] = -1
	}
	for _, set := range l.Sets {
		members := make([]Node, len(set.Members))
		for r, idx := range set.Members {
			n, ok := byIndex[idx]
			if !ok {
				n = Node{Index: idx}
			}
			members[r] = n
		}
		rep.Nodes += len(members)
		sr := setTolerance(set.ID, members, depth, s)
		for i, t := range sr.Tolerance {
			if rep.Tolerance[i] < 0 || t < rep.Tolerance[i] {
				rep.Tolerance[i] = t
			}
		}
		rep.Sets = append(rep.Sets, sr)
	}
	for i, t := range rep.Tolerance {
		rep.Tolerance[i] = max(t, 0)
	}
	return rep
}

// effective clamps the scheme's parameter to what a set of p allows, so a
// misfit scheme is never reported as stronger than it can be.
func effective(s Scheme, p int) (kind string, param int) {
	switch s.Kind {
	case KindPartner:
		return KindPartner, max(0, min(s.Replicas, p-1))
	case KindXOR:
		return KindXOR, max(0, min(1, p-1))
	case KindRS:
		return KindRS, max(0, min(s.Parity, p-1))
	}
	return KindSingle, 0
}

func setTolerance(id int, members []Node, depth int, s Scheme) SetReport {
	p := len(members)
	sr := SetReport{ID: id, Members: make([]int, p), Domains: make([]string, p)}
	for r, n := range members {
		sr.Members[r] = n.Index
		sr.Domains[r] = strings.Join(n.Domain, "/")
	}
	kind, param := effective(s, p)
	sr.Failures = param
	// Who holds what: partner copies, or metadata copies for xor (right
	// neighbour) and rs (k right neighbours).
	if kind != KindSingle && param > 0 {
		sr.Holders = make([][]int, p)
		for r := range members {
			for _, h := range PartnerHolders(p, r, param) {
				sr.Holders[r] = append(sr.Holders[r], members[h].Index)
			}
		}
	}
	sr.Tolerance = make([]int, depth+1)
	for l := 1; l <= depth+1; l++ {
		key := func(n Node) string { return domainKey(n, l) }
		if l == depth+1 {
			key = func(n Node) string { return domainKey(n, len(n.Domain)+1) } // the node itself
		}
		if kind == KindPartner {
			sr.Tolerance[l-1] = partnerLevelTolerance(members, param, key)
		} else {
			sr.Tolerance[l-1] = countLevelTolerance(members, sr.Failures, key)
		}
	}
	return sr
}

// countLevelTolerance is the largest f such that the f largest per-domain
// member counts sum to at most tol: losing any f domains loses at most tol
// members.
func countLevelTolerance(members []Node, tol int, key func(Node) string) int {
	counts := map[string]int{}
	for _, n := range members {
		counts[key(n)]++
	}
	sizes := make([]int, 0, len(counts))
	for _, c := range counts {
		sizes = append(sizes, c)
	}
	slices.Sort(sizes)
	slices.Reverse(sizes)
	f, sum := 0, 0
	for _, c := range sizes {
		if sum+c > tol {
			break
		}
		sum += c
		f++
	}
	return f
}

// partnerLevelTolerance is, minimised over members, the number of distinct
// domains among the member and its r holders, minus one: a member's data
// survives until every one of those domains has failed.
func partnerLevelTolerance(members []Node, r int, key func(Node) string) int {
	p := len(members)
	best := -1
	for rank := range members {
		seen := map[string]bool{key(members[rank]): true}
		for _, h := range PartnerHolders(p, rank, r) {
			seen[key(members[h])] = true
		}
		if t := len(seen) - 1; best < 0 || t < best {
			best = t
		}
	}
	return max(best, 0)
}
