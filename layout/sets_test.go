package layout

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// nodesIn builds nodes 0..n-1 from one domain string per node.
func nodesIn(t testing.TB, paths ...string) []Node {
	t.Helper()
	d, err := ParseDomains(paths)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := NewNodes(len(paths), d)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func plainNodes(t testing.TB, n int) []Node {
	t.Helper()
	nodes, err := NewNodes(n, nil)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func setSizes(l *Layout) []int {
	var s []int
	for _, set := range l.Sets {
		s = append(s, len(set.Members))
	}
	return s
}

func memberSets(l *Layout) [][]int {
	var out [][]int
	for _, set := range l.Sets {
		m := slices.Clone(set.Members)
		slices.Sort(m)
		out = append(out, m)
	}
	return out
}

func TestBuildSetSizes(t *testing.T) {
	tests := []struct {
		n, setSize int
		want       []int
	}{
		{1, 8, []int{1}},
		{2, 8, []int{2}},
		{5, 4, []int{5}}, // no set of one left over
		{7, 8, []int{7}},
		{8, 8, []int{8}},
		{9, 4, []int{5, 4}},
		{10, 3, []int{4, 3, 3}},
		{12, 4, []int{4, 4, 4}},
		{15, 8, []int{15}},
		{16, 8, []int{8, 8}},
		{17, 8, []int{9, 8}},
		{23, 8, []int{12, 11}},
		{4, 1, []int{1, 1, 1, 1}}, // SINGLE: every node a set of its own
	}
	for _, tt := range tests {
		l, err := Build(plainNodes(t, tt.n), tt.setSize)
		if err != nil {
			t.Fatalf("Build(%d nodes, %d): %v", tt.n, tt.setSize, err)
		}
		if got := setSizes(l); !slices.Equal(got, tt.want) {
			t.Errorf("Build(%d nodes, %d) set sizes %v, want %v", tt.n, tt.setSize, got, tt.want)
		}
		for id, s := range l.Sets {
			if s.ID != id {
				t.Errorf("set %d has ID %d", id, s.ID)
			}
		}
		if len(l.Warnings) != 0 {
			t.Errorf("Build(%d nodes, %d) without domains warns %q", tt.n, tt.setSize, l.Warnings)
		}
	}
}

func TestBuildNoDomainsStrides(t *testing.T) {
	// Without domains, consecutive node indices (often neighbours in one
	// rack) land in different sets.
	l, err := Build(plainNodes(t, 16), 8)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 2, 4, 6, 8, 10, 12, 14}, {1, 3, 5, 7, 9, 11, 13, 15}}
	if got := [][]int{l.Sets[0].Members, l.Sets[1].Members}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sets %v, want %v", got, want)
	}
}

func TestBuildUnevenRacks(t *testing.T) {
	// 9 nodes in racks of 4, 4 and 1, set size 4: two sets (5 and 4); each
	// set gets two nodes of rack1 and of rack2, which cannot be avoided
	// with 3 racks, and the lone rack3 node joins the first set.
	nodes := nodesIn(t, "rack1", "rack1", "rack1", "rack1", "rack2", "rack2", "rack2", "rack2", "rack3")
	l, err := Build(nodes, 4)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int{{0, 2, 4, 6, 8}, {1, 3, 5, 7}}; !reflect.DeepEqual(memberSets(l), want) {
		t.Fatalf("sets %v, want %v", memberSets(l), want)
	}
	wantWarn := []string{
		"set 0: nodes 0 and 2 share failure domain rack1",
		"set 0: nodes 4 and 6 share failure domain rack2",
		"set 1: nodes 1 and 3 share failure domain rack1",
		"set 1: nodes 5 and 7 share failure domain rack2",
	}
	if !slices.Equal(l.Warnings, wantWarn) {
		t.Fatalf("warnings %q\nwant %q", l.Warnings, wantWarn)
	}
	checkRingNeighbours(t, l, nodes, 1)
}

func TestBuildThreeRacks(t *testing.T) {
	// 12 nodes, node i in rack i%3.
	paths := make([]string, 12)
	for i := range paths {
		paths[i] = fmt.Sprintf("rack%d", i%3)
	}
	nodes := nodesIn(t, paths...)

	// Set size 3: four sets, one node of each rack in each: nothing shared.
	l, err := Build(nodes, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}}; !reflect.DeepEqual(memberSets(l), want) {
		t.Fatalf("set size 3: sets %v, want %v", memberSets(l), want)
	}
	if len(l.Warnings) != 0 {
		t.Fatalf("set size 3: warnings %q", l.Warnings)
	}

	// Set size 4: three sets of four; each set must hold two nodes of one
	// rack, a different rack for each set.
	l, err = Build(nodes, 4)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int{{0, 5, 7, 9}, {1, 3, 8, 10}, {2, 4, 6, 11}}; !reflect.DeepEqual(memberSets(l), want) {
		t.Fatalf("set size 4: sets %v, want %v", memberSets(l), want)
	}
	wantWarn := []string{
		"set 0: nodes 0 and 9 share failure domain rack0",
		"set 1: nodes 1 and 10 share failure domain rack1",
		"set 2: nodes 2 and 11 share failure domain rack2",
	}
	if !slices.Equal(l.Warnings, wantWarn) {
		t.Fatalf("set size 4: warnings %q\nwant %q", l.Warnings, wantWarn)
	}
	checkRingNeighbours(t, l, nodes, 1)
}

func TestBuildTwoLevels(t *testing.T) {
	// 2 racks x 2 enclosures x 2 nodes, set size 4: each set takes one node
	// per enclosure, so two per rack, and the ring alternates racks.
	nodes := nodesIn(t, "r1/e1", "r1/e1", "r1/e2", "r1/e2", "r2/e1", "r2/e1", "r2/e2", "r2/e2")
	l, err := Build(nodes, 4)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}}; !reflect.DeepEqual(memberSets(l), want) {
		t.Fatalf("sets %v, want %v", memberSets(l), want)
	}
	wantWarn := []string{
		"set 0: nodes 0 and 2 share failure domain r1",
		"set 0: nodes 4 and 6 share failure domain r2",
		"set 1: nodes 1 and 3 share failure domain r1",
		"set 1: nodes 5 and 7 share failure domain r2",
	}
	if !slices.Equal(l.Warnings, wantWarn) {
		t.Fatalf("warnings %q\nwant %q", l.Warnings, wantWarn)
	}
	checkRingNeighbours(t, l, nodes, 1)

	// One set of all 8: four per rack and two per enclosure. Neighbours
	// alternate racks, and members two apart are in different enclosures.
	l, err = Build(nodes, 8)
	if err != nil {
		t.Fatal(err)
	}
	checkRingNeighbours(t, l, nodes, 1)
	byIndex := map[int]Node{}
	for _, n := range nodes {
		byIndex[n.Index] = n
	}
	m := l.Sets[0].Members
	for r := range m {
		a, b := byIndex[m[r]], byIndex[m[(r+2)%len(m)]]
		if domainKey(a, 2) == domainKey(b, 2) {
			t.Errorf("ring %v: ranks %d and %d share enclosure %s", m, r, (r+2)%len(m), domainKey(a, 2))
		}
	}
	if m[0] != 0 {
		t.Errorf("ring %v does not start at the lowest node index", m)
	}
	if got := len(l.Warnings); got != 6 {
		t.Errorf("%d warnings, want 2 racks + 4 enclosures: %q", got, l.Warnings)
	}
}

// checkRingNeighbours fails if two ring neighbours share a level-l domain.
func checkRingNeighbours(t *testing.T, l *Layout, nodes []Node, level int) {
	t.Helper()
	byIndex := map[int]Node{}
	for _, n := range nodes {
		byIndex[n.Index] = n
	}
	for _, s := range l.Sets {
		p := len(s.Members)
		for r := 0; r < p && p > 1; r++ {
			a, b := byIndex[s.Members[r]], byIndex[s.Members[Right(p, r)]]
			if domainKey(a, level) == domainKey(b, level) {
				t.Errorf("set %d ring %v: neighbours %d and %d share %s", s.ID, s.Members, a.Index, b.Index, domainKey(a, level))
			}
		}
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		nodes   []Node
		setSize int
		want    string
		wantErr error
	}{
		{nil, 4, "at least one node", ErrNodes},
		{[]Node{{Index: 0}}, 0, "set size 0", ErrNodes},
		{[]Node{{Index: -1}}, 4, "negative node index -1", ErrNodes},
		{[]Node{{Index: 3}, {Index: 3}}, 4, "node index 3 appears twice", ErrNodes},
		{[]Node{{0, []string{"r1"}}, {1, []string{"r1", "e1"}}}, 4, "node 1 has 2 failure-domain levels, node 0 has 1", ErrDomain},
		{[]Node{{0, []string{""}}}, 4, "empty component", ErrDomain},
		{[]Node{{0, []string{"a/b"}}}, 4, "contains '/'", ErrDomain},
	}
	for _, tt := range tests {
		_, err := Build(tt.nodes, tt.setSize)
		if !errors.Is(err, tt.wantErr) || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Build(%v, %d) = %v, want %v containing %q", tt.nodes, tt.setSize, err, tt.wantErr, tt.want)
		}
	}
}

func TestBuildDeterministic(t *testing.T) {
	// Every node computes the layout from its own copy of the node list; the
	// order in which that list is given must not matter.
	var paths []string
	for i := 0; i < 30; i++ {
		paths = append(paths, fmt.Sprintf("rack%d/enc%d", i%4, i%3))
	}
	nodes := nodesIn(t, paths...)
	want, err := Build(nodes, 6)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 20; i++ {
		shuffled := slices.Clone(nodes)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		got, err := Build(shuffled, 6)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Sets, want.Sets) || !slices.Equal(got.Warnings, want.Warnings) {
			t.Fatalf("shuffled input gives another layout:\n%v\n%v", got.Sets, want.Sets)
		}
	}
}

func TestFind(t *testing.T) {
	l, err := Build(plainNodes(t, 10), 4)
	if err != nil {
		t.Fatal(err)
	}
	scan := &Layout{Sets: l.Sets} // not made by Build: Find scans
	for node := 0; node < 10; node++ {
		for _, lay := range []*Layout{l, scan} {
			set, rank := lay.Find(node)
			if set == nil || set.Members[rank] != node {
				t.Fatalf("Find(%d) = %v, %d", node, set, rank)
			}
		}
	}
	for _, node := range []int{-1, 10, 99} {
		if set, rank := l.Find(node); set != nil || rank != -1 {
			t.Errorf("Find(%d) = %v, %d; want nil, -1", node, set, rank)
		}
		if set, rank := scan.Find(node); set != nil || rank != -1 {
			t.Errorf("scan Find(%d) = %v, %d; want nil, -1", node, set, rank)
		}
	}
	var nilLayout *Layout
	if set, rank := nilLayout.Find(0); set != nil || rank != -1 {
		t.Errorf("nil layout Find = %v, %d", set, rank)
	}
	if l.MinSetSize() != 5 || l.MaxSetSize() != 5 || nilLayout.MinSetSize() != 0 || nilLayout.MaxSetSize() != 0 {
		t.Errorf("Min/MaxSetSize = %d/%d", l.MinSetSize(), l.MaxSetSize())
	}
}

func TestBuildOneNode(t *testing.T) {
	l, err := Build([]Node{{Index: 0, Domain: []string{"rack1"}}}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sets) != 1 || !slices.Equal(l.Sets[0].Members, []int{0}) || len(l.Warnings) != 0 {
		t.Fatalf("one node: %+v", l)
	}
}

// TestBuildProperties checks, for random jobs: every node in exactly one set;
// G = max(1, n/setSize) sets whose sizes differ by at most one; each domain,
// at every level, puts floor or ceil(count/G) nodes in every set, so a set
// holds two members of one domain only when that domain has more than G
// nodes, and exactly those cases warn; ring neighbours differ at every level
// whenever the outermost level allows it.
func TestBuildProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	iters := 400
	if testing.Short() {
		iters = 100
	}
	for it := 0; it < iters; it++ {
		n := 1 + rng.Intn(120)
		setSize := 1 + rng.Intn(10)
		depth := rng.Intn(3)
		fan := []int{1 + rng.Intn(6), 1 + rng.Intn(4)}
		nodes := make([]Node, n)
		for i := range nodes {
			nodes[i].Index = i
			for lv := 0; lv < depth; lv++ {
				nodes[i].Domain = append(nodes[i].Domain, fmt.Sprintf("d%d", rng.Intn(fan[lv])))
			}
		}
		l, err := Build(nodes, setSize)
		if err != nil {
			t.Fatalf("Build(n=%d, size=%d, depth=%d): %v", n, setSize, depth, err)
		}
		name := fmt.Sprintf("n=%d size=%d depth=%d", n, setSize, depth)
		checkLayoutProperties(t, name, l, nodes, setSize, depth)
	}
}

func checkLayoutProperties(t *testing.T, name string, l *Layout, nodes []Node, setSize, depth int) {
	t.Helper()
	n := len(nodes)
	g := max(1, n/setSize)
	if len(l.Sets) != g {
		t.Fatalf("%s: %d sets, want %d", name, len(l.Sets), g)
	}
	seen := map[int]int{}
	for _, s := range l.Sets {
		for r, m := range s.Members {
			seen[m]++
			if set, rank := l.Find(m); set == nil || set.ID != s.ID || rank != r {
				t.Fatalf("%s: Find(%d) disagrees with set %d rank %d", name, m, s.ID, r)
			}
		}
	}
	for _, nd := range nodes {
		if seen[nd.Index] != 1 {
			t.Fatalf("%s: node %d is in %d sets", name, nd.Index, seen[nd.Index])
		}
	}
	if len(seen) != n {
		t.Fatalf("%s: %d distinct members for %d nodes", name, len(seen), n)
	}
	if lo, hi := l.MinSetSize(), l.MaxSetSize(); hi-lo > 1 || lo < min(n, setSize) {
		t.Fatalf("%s: set sizes %d..%d", name, lo, hi)
	}
	byIndex := map[int]Node{}
	for _, nd := range nodes {
		byIndex[nd.Index] = nd
	}
	wantWarn := 0
	for lv := 1; lv <= depth; lv++ {
		total := map[string]int{}
		for _, nd := range nodes {
			total[domainKey(nd, lv)]++
		}
		for _, s := range l.Sets {
			in := map[string]int{}
			for _, m := range s.Members {
				in[domainKey(byIndex[m], lv)]++
			}
			for d, c := range total {
				if lo, hi := c/g, (c+g-1)/g; in[d] < lo || in[d] > hi {
					t.Fatalf("%s: set %d has %d of domain %s's %d nodes, want %d..%d", name, s.ID, in[d], d, c, lo, hi)
				}
				if c <= g && in[d] > 1 {
					t.Fatalf("%s: set %d has %d members of domain %s with only %d nodes", name, s.ID, in[d], d, c)
				}
				if in[d] > 1 {
					wantWarn++
				}
			}
			// Ring neighbours: when no level-1 domain holds more than half
			// the set, no neighbours share a domain at any level.
			p := len(s.Members)
			if lv == 1 && p >= 2 && maxCount(in) <= p/2 {
				for r := 0; r < p; r++ {
					a, b := byIndex[s.Members[r]], byIndex[s.Members[Right(p, r)]]
					if domainKey(a, depth) == domainKey(b, depth) || domainKey(a, 1) == domainKey(b, 1) {
						t.Fatalf("%s: set %d ring %v: neighbours %d and %d share a domain", name, s.ID, s.Members, a.Index, b.Index)
					}
				}
			}
		}
	}
	if len(l.Warnings) != wantWarn {
		t.Fatalf("%s: %d warnings, want %d: %q", name, len(l.Warnings), wantWarn, l.Warnings)
	}
}

func maxCount(m map[string]int) int {
	best := 0
	for _, c := range m {
		best = max(best, c)
	}
	return best
}
