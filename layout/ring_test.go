package layout

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

func ringOf(nodes []Node) []int {
	out := make([]int, len(nodes))
	for i, n := range nodes {
		out[i] = n.Index
	}
	return out
}

func ringDomains(nodes []Node) string {
	var s []string
	for _, n := range nodes {
		s = append(s, strings.Join(n.Domain, "/"))
	}
	return strings.Join(s, " ")
}

func TestArrangeRingExamples(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		want  string // domains in ring order, "" to check only cost
		cost  []int  // ringCost, when not nil
	}{
		// Three racks of two: every window of three ranks spans three
		// racks (the even-odd fill alone would give A B A C B C).
		{"ABCABC", []string{"A", "A", "B", "B", "C", "C"}, "A B C A B C", []int{0, 0, 6}},
		// A holds half the set: it takes every other rank.
		{"half", []string{"A", "A", "A", "B", "B", "C"}, "A B A B A C", nil},
		// One rack, two enclosures: enclosures alternate.
		{"enclosures", []string{"r/e1", "r/e1", "r/e2", "r/e2"}, "r/e1 r/e2 r/e1 r/e2", nil},
		// A rack holding 4 of 5 members cannot avoid three rack-sharing
		// neighbour pairs (4 A's on a ring of 5 leave one gap), but no
		// neighbours share an enclosure; at distance 2, three pairs share
		// a rack and two an enclosure.
		{"dominant rack", []string{"A/a1", "A/a1", "A/a2", "A/a2", "B/b"}, "", []int{3, 0, 3, 2}},
	}
	for _, tt := range tests {
		nodes := nodesIn(t, tt.paths...)
		depth := len(nodes[0].Domain)
		got := arrangeRing(nodes, depth)
		if d := ringDomains(got); tt.want != "" && d != tt.want {
			t.Errorf("%s: ring %v has domains %q, want %q", tt.name, ringOf(got), d, tt.want)
		}
		if tt.cost != nil {
			// nodesIn numbers nodes 0..n-1, so indices are positions.
			if c := ringCost(nil, ringOf(got), ringKeys(nodes, depth), depth); !slices.Equal(c, tt.cost) {
				t.Errorf("%s: ring %v (%s) cost %v, want %v", tt.name, ringOf(got), ringDomains(got), c, tt.cost)
			}
		}
		if got[0].Index != 0 {
			t.Errorf("%s: ring %v does not start at node 0", tt.name, ringOf(got))
		}
		sorted := slices.Sorted(slices.Values(ringOf(got)))
		if !slices.Equal(sorted, ringOf(nodes)) {
			t.Errorf("%s: ring %v is not a permutation of the members", tt.name, ringOf(got))
		}
	}
	// Without domains, or with two members, the order is kept.
	plain := plainNodes(t, 5)
	if got := ringOf(arrangeRing(plain, 0)); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("no domains: %v", got)
	}
	two := nodesIn(t, "A", "A")
	if got := ringOf(arrangeRing(two, 1)); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("two members: %v", got)
	}
}

// permutations calls f with every ordering of a[k:] (a[:k] fixed).
func permutations(a []int, k int, f func([]int)) {
	if k == len(a) {
		f(a)
		return
	}
	for i := k; i < len(a); i++ {
		a[k], a[i] = a[i], a[k]
		permutations(a, k+1, f)
		a[k], a[i] = a[i], a[k]
	}
}

// TestArrangeRingNeighboursOptimal compares the neighbour part of the ring
// cost (pairs of neighbours sharing a domain, outermost level first) with
// the best over all orderings, for random small sets of one and two levels.
func TestArrangeRingNeighboursOptimal(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	iters := 300
	if testing.Short() {
		iters = 60
	}
	for it := 0; it < iters; it++ {
		p := 3 + rng.Intn(5)
		depth := 1 + rng.Intn(2)
		racks, encs := 1+rng.Intn(4), 1+rng.Intn(3)
		members := make([]Node, p)
		for i := range members {
			members[i] = Node{Index: 10 + i, Domain: []string{fmt.Sprintf("r%d", rng.Intn(racks))}}
			if depth == 2 {
				members[i].Domain = append(members[i].Domain, fmt.Sprintf("e%d", rng.Intn(encs)))
			}
		}
		keys := ringKeys(members, depth)
		pos := map[int]int{}
		for i, m := range members {
			pos[m.Index] = i
		}
		got := arrangeRing(members, depth)
		gotRing := make([]int, p)
		for i, n := range got {
			gotRing[i] = pos[n.Index]
		}
		gotCost := ringCost(nil, gotRing, keys, depth)[:depth]

		var best []int
		perm := make([]int, p)
		for i := range perm {
			perm[i] = i
		}
		// Rotations cost the same: fix member 0 first.
		permutations(perm, 1, func(r []int) {
			c := ringCost(nil, r, keys, depth)[:depth]
			if best == nil || slices.Compare(c, best) < 0 {
				best = slices.Clone(c)
			}
		})
		if slices.Compare(gotCost, best) != 0 {
			t.Fatalf("members %v: ring %v neighbour cost %v, best possible %v", members, ringOf(got), gotCost, best)
		}
	}
}
