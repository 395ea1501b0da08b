package layout

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestToleranceTwoLevels(t *testing.T) {
	// 2 racks x 2 enclosures x 2 nodes in sets of 4: each set has one node
	// per enclosure, two per rack, and its ring alternates racks
	// (TestBuildTwoLevels), e.g. r1/e1 r2/e1 r1/e2 r2/e2.
	nodes := nodesIn(t, "r1/e1", "r1/e1", "r1/e2", "r1/e2", "r2/e1", "r2/e1", "r2/e2", "r2/e2")
	l, err := Build(nodes, 4)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		s        Scheme
		failures int
		levels   []int // r, e, node
	}{
		// Per-domain counts in a set: racks 2+2, enclosures 1+1+1+1.
		{Scheme{Kind: KindSingle}, 0, []int{0, 0, 0}},
		// xor: one rack takes 2 > 1 members; one enclosure takes 1.
		{Scheme{Kind: KindXOR}, 1, []int{0, 1, 1}},
		// rs k=2: one rack (2 <= 2), two racks 4 > 2; two enclosures.
		{Scheme{Kind: KindRS, Parity: 2}, 2, []int{1, 2, 2}},
		// rs k=3: still one rack (2+2 > 3); three enclosures.
		{Scheme{Kind: KindRS, Parity: 3}, 3, []int{1, 3, 3}},
		// partner r=1: member and right neighbour are in different racks
		// and enclosures: two domains, tolerance 1 at every level.
		{Scheme{Kind: KindPartner, Replicas: 1}, 1, []int{1, 1, 1}},
		// partner r=2: a window of three ranks spans 2 racks, 3
		// enclosures, 3 nodes.
		{Scheme{Kind: KindPartner, Replicas: 2}, 2, []int{1, 2, 2}},
		// partner r=3: the whole set: 2 racks, 4 enclosures, 4 nodes.
		{Scheme{Kind: KindPartner, Replicas: 3}, 3, []int{1, 3, 3}},
	}
	for _, tt := range tests {
		rep := Tolerance(l, nodes, tt.s)
		if rep.Problem != "" {
			t.Errorf("%v: problem %q", tt.s, rep.Problem)
		}
		if !slices.Equal(rep.Levels, []string{"r", "e", "node"}) {
			t.Fatalf("levels %q", rep.Levels)
		}
		if !slices.Equal(rep.Tolerance, tt.levels) {
			t.Errorf("%v: job tolerance %v, want %v", tt.s, rep.Tolerance, tt.levels)
		}
		if len(rep.Sets) != 2 || rep.Nodes != 8 {
			t.Fatalf("%v: %d sets, %d nodes", tt.s, len(rep.Sets), rep.Nodes)
		}
		for _, sr := range rep.Sets {
			if sr.Failures != tt.failures || !slices.Equal(sr.Tolerance, tt.levels) {
				t.Errorf("%v set %d: failures %d tolerance %v, want %d %v", tt.s, sr.ID, sr.Failures, sr.Tolerance, tt.failures, tt.levels)
			}
		}
	}
}

func TestToleranceUnevenRacks(t *testing.T) {
	// 9 nodes in racks of 4, 4, 1 with set size 4: set 0 holds racks
	// 2+2+1 members, set 1 holds 2+2.
	nodes := nodesIn(t, "rack1", "rack1", "rack1", "rack1", "rack2", "rack2", "rack2", "rack2", "rack3")
	l, err := Build(nodes, 4)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		s      Scheme
		perSet [][]int // rack, node for set 0 and set 1
		job    []int
	}{
		// xor: a rack takes 2 members: 0 racks; 1 node.
		{Scheme{Kind: KindXOR}, [][]int{{0, 1}, {0, 1}}, []int{0, 1}},
		// rs k=2: counts 2,2,1 -> 2 <= 2, 4 > 2: 1 rack; 2 nodes.
		{Scheme{Kind: KindRS, Parity: 2}, [][]int{{1, 2}, {1, 2}}, []int{1, 2}},
		// rs k=3: 2 <= 3, 4 > 3: still 1 rack; 3 nodes.
		{Scheme{Kind: KindRS, Parity: 3}, [][]int{{1, 3}, {1, 3}}, []int{1, 3}},
		// partner r=1: ring neighbours never share a rack.
		{Scheme{Kind: KindPartner, Replicas: 1}, [][]int{{1, 1}, {1, 1}}, []int{1, 1}},
	}
	for _, tt := range tests {
		rep := Tolerance(l, nodes, tt.s)
		if !slices.Equal(rep.Levels, []string{"rack", "node"}) {
			t.Fatalf("levels %q", rep.Levels)
		}
		for i, sr := range rep.Sets {
			if !slices.Equal(sr.Tolerance, tt.perSet[i]) {
				t.Errorf("%v set %d (%v in %q): tolerance %v, want %v", tt.s, i, sr.Members, sr.Domains, sr.Tolerance, tt.perSet[i])
			}
		}
		if !slices.Equal(rep.Tolerance, tt.job) {
			t.Errorf("%v: job tolerance %v, want %v", tt.s, rep.Tolerance, tt.job)
		}
		if !slices.Equal(rep.Warnings, l.Warnings) {
			t.Errorf("report warnings %q, want the layout's", rep.Warnings)
		}
	}
}

func TestToleranceHolders(t *testing.T) {
	nodes := plainNodes(t, 5)
	l, err := Build(nodes, 4) // one set of 5: 0 1 2 3 4
	if err != nil {
		t.Fatal(err)
	}
	rep := Tolerance(l, nodes, Scheme{Kind: KindPartner, Replicas: 2})
	want := [][]int{{1, 2}, {2, 3}, {3, 4}, {4, 0}, {0, 1}}
	if !reflect.DeepEqual(rep.Sets[0].Holders, want) {
		t.Fatalf("holders %v, want %v", rep.Sets[0].Holders, want)
	}
	if !slices.Equal(rep.Levels, []string{"node"}) || !slices.Equal(rep.Tolerance, []int{2}) {
		t.Fatalf("levels %q tolerance %v", rep.Levels, rep.Tolerance)
	}
	rep = Tolerance(l, nodes, Scheme{Kind: KindXOR})
	if want := [][]int{{1}, {2}, {3}, {4}, {0}}; !reflect.DeepEqual(rep.Sets[0].Holders, want) {
		t.Fatalf("xor metadata holders %v, want %v", rep.Sets[0].Holders, want)
	}
	if rep = Tolerance(l, nodes, Scheme{Kind: KindSingle}); rep.Sets[0].Holders != nil {
		t.Fatalf("single has holders %v", rep.Sets[0].Holders)
	}
}

func TestToleranceMisfit(t *testing.T) {
	nodes := plainNodes(t, 3)
	l, err := Build(nodes, 3)
	if err != nil {
		t.Fatal(err)
	}
	// Three replicas need four nodes: reported, and clamped to 2 so the
	// report never promises more than the set can give.
	rep := Tolerance(l, nodes, Scheme{Kind: KindPartner, Replicas: 3})
	if !strings.Contains(rep.Problem, "redundancy.replicas = 3 needs sets of at least 4 nodes") {
		t.Fatalf("problem %q", rep.Problem)
	}
	if rep.Sets[0].Failures != 2 || !slices.Equal(rep.Tolerance, []int{2}) {
		t.Fatalf("failures %d tolerance %v", rep.Sets[0].Failures, rep.Tolerance)
	}
	rep = Tolerance(l, nodes, Scheme{Kind: KindRS, Parity: 5})
	if rep.Problem == "" || rep.Sets[0].Failures != 2 {
		t.Fatalf("rs k=5 on 3 nodes: problem %q failures %d", rep.Problem, rep.Sets[0].Failures)
	}
	// A node missing from nodes is its own domain; a nil layout is a
	// problem, not a panic.
	rep = Tolerance(l, nodes[:1], Scheme{Kind: KindXOR})
	if !slices.Equal(rep.Tolerance, []int{1}) {
		t.Fatalf("partial nodes: %v", rep.Tolerance)
	}
	if rep = Tolerance(nil, nil, Scheme{Kind: KindXOR}); rep.Problem == "" {
		t.Fatal("nil layout: no problem reported")
	}
	_ = rep.String()
}

func TestReportJSON(t *testing.T) {
	nodes := nodesIn(t, "rack1", "rack1", "rack2", "rack2")
	l, err := Build(nodes, 2)
	if err != nil {
		t.Fatal(err)
	}
	rep := Tolerance(l, nodes, Scheme{Kind: KindPartner, Replicas: 1})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if got, want := sortedKeys(top), []string{"levels", "nodes", "scheme", "sets", "tolerance"}; !slices.Equal(got, want) {
		t.Errorf("report keys %q, want %q", got, want)
	}
	var sets []map[string]json.RawMessage
	if err := json.Unmarshal(top["sets"], &sets); err != nil {
		t.Fatal(err)
	}
	if got, want := sortedKeys(sets[0]), []string{"domains", "failures", "holders", "id", "members", "tolerance"}; !slices.Equal(got, want) {
		t.Errorf("set keys %q, want %q", got, want)
	}
	if got := string(top["scheme"]); got != `{"kind":"partner","replicas":1}` {
		t.Errorf("scheme %s", got)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, rep) {
		t.Errorf("round trip: %v\n%+v\n%+v", err, back, rep)
	}
}

func sortedKeys(m map[string]json.RawMessage) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

func TestReportString(t *testing.T) {
	nodes := nodesIn(t, "r1/e1", "r1/e1", "r1/e2", "r1/e2", "r2/e1", "r2/e1", "r2/e2", "r2/e2")
	l, err := Build(nodes, 4)
	if err != nil {
		t.Fatal(err)
	}
	rep := Tolerance(l, nodes, Scheme{Kind: KindXOR})
	out := rep.String()
	lines := strings.Split(out, "\n")
	if want := "scheme xor: 8 nodes in 2 sets; tolerates 0 r failures or 1 e failure or 1 node failure at once"; lines[0] != want {
		t.Errorf("first line %q\nwant %q", lines[0], want)
	}
	if lines[1] != "failure domains: r > e > node" {
		t.Errorf("second line %q", lines[1])
	}
	var head, job []string
	rows := map[string][]string{}
	for _, ln := range lines {
		f := strings.Fields(ln)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "set":
			if len(f) > 1 && f[1] == "members" {
				head = f
			}
		case "job":
			job = f
		case "0", "1":
			rows[f[0]] = f
		}
	}
	if !slices.Equal(head, []string{"set", "members", "domains", "metadata", "on", "survives", "r", "e", "node"}) {
		t.Errorf("header %q", head)
	}
	if !slices.Equal(job, []string{"job", "0", "1", "1"}) {
		t.Errorf("job row %q", job)
	}
	for id, s := range l.Sets {
		f := rows[fmt.Sprint(id)]
		if len(f) < 1+2*len(s.Members) {
			t.Fatalf("set %d row %q", id, f)
		}
		if got := strings.Join(f[1:1+len(s.Members)], " "); got != joinInts(s.Members, " ") {
			t.Errorf("set %d members %q, want %v", id, got, s.Members)
		}
		if tail := f[len(f)-5:]; !slices.Equal(tail, []string{"1", "member", "0", "1", "1"}) {
			t.Errorf("set %d row ends %q", id, tail)
		}
	}
	if !strings.Contains(out, "\nwarnings:\n  set 0: nodes 0 and 2 share failure domain r1\n") {
		t.Errorf("warnings missing:\n%s", out)
	}
	misfit := Tolerance(l, nodes, Scheme{Kind: KindRS, Parity: 4}).String()
	if !strings.Contains(misfit, "PROBLEM: redundancy scheme does not fit: redundancy.parity = 4") {
		t.Errorf("misfit report lacks the problem:\n%s", misfit)
	}
}

func ExampleTolerance() {
	// Six nodes in three racks, XOR over sets of three.
	domains, _ := ParseDomains([]string{"rack1", "rack1", "rack2", "rack2", "rack3", "rack3"})
	nodes, _ := NewNodes(6, domains)
	l, _ := Build(nodes, 3)
	fmt.Print(Tolerance(l, nodes, Scheme{Kind: KindXOR}))
	// Output:
	// scheme xor: 6 nodes in 2 sets; tolerates 1 rack failure or 1 node failure at once
	// failure domains: rack > node
	//
	// set  members  domains            metadata on  survives  rack  node
	// 0    0 2 4    rack1 rack2 rack3  0>2 2>4 4>0  1 member  1     1
	// 1    1 3 5    rack1 rack2 rack3  1>3 3>5 5>1  1 member  1     1
	// job                                                     1     1
}

func TestToleranceHandMadeLayout(t *testing.T) {
	// A layout decoded from JSON or built by hand, with an empty set: no
	// panic, nothing negative.
	l := &Layout{Sets: []Set{{ID: 0, Members: []int{0, 1}}, {ID: 1}}}
	for _, kind := range []string{KindSingle, KindPartner, KindXOR, KindRS} {
		rep := Tolerance(l, nil, Scheme{Kind: kind, Replicas: 1, Parity: 1})
		if rep.Problem == "" {
			t.Errorf("%s: empty set not reported", kind)
		}
		for _, sr := range rep.Sets {
			if sr.Failures < 0 || slices.Min(sr.Tolerance) < 0 {
				t.Errorf("%s set %d: failures %d tolerance %v", kind, sr.ID, sr.Failures, sr.Tolerance)
			}
		}
	}
}
