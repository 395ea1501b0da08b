package layout

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseDomains(t *testing.T) {
	tests := []struct {
		in   []string
		want [][]string
	}{
		{nil, nil},
		{[]string{}, nil},
		{[]string{"rack1", " rack2 "}, [][]string{{"rack1"}, {"rack2"}}},
		{[]string{"rack1/enc2", "rack1/enc1", "rack2/enc1"}, [][]string{{"rack1", "enc2"}, {"rack1", "enc1"}, {"rack2", "enc1"}}},
		{[]string{"", ""}, [][]string{nil, nil}},
		{[]string{"r/e/c/n"}, [][]string{{"r", "e", "c", "n"}}},
	}
	for _, tt := range tests {
		got, err := ParseDomains(tt.in)
		if err != nil {
			t.Errorf("ParseDomains(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseDomains(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseDomainsErrors(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"rack1", "rack1/enc1"}, "failure domain 1 \"rack1/enc1\" has 2 levels, domain 0 \"rack1\" has 1"},
		{[]string{"", "rack1"}, "has 1 levels, domain 0 \"\" has 0"},
		{[]string{"rack1//enc"}, "failure domain 0: invalid failure domain \"rack1//enc\": empty component"},
		{[]string{"a", "/a"}, "failure domain 1"},
		{[]string{"a/"}, "empty component"},
		{[]string{"rack 1"}, "whitespace"},
		{[]string{"rack\x001"}, "control character"},
		{[]string{"rack\xff"}, "control character"},
	}
	for _, tt := range tests {
		_, err := ParseDomains(tt.in)
		if err == nil || !errors.Is(err, ErrDomain) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseDomains(%q) = %v, want ErrDomain containing %q", tt.in, err, tt.want)
		}
	}
}

func TestNewNodes(t *testing.T) {
	nodes, err := NewNodes(3, [][]string{{"r1"}, {"r2"}, {"r1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{{0, []string{"r1"}}, {1, []string{"r2"}}, {2, []string{"r1"}}}
	if !reflect.DeepEqual(nodes, want) {
		t.Fatalf("NewNodes = %v, want %v", nodes, want)
	}
	nodes, err = NewNodes(2, nil)
	if err != nil || !reflect.DeepEqual(nodes, []Node{{Index: 0}, {Index: 1}}) {
		t.Fatalf("NewNodes(2, nil) = %v, %v", nodes, err)
	}
	if _, err := NewNodes(0, nil); !errors.Is(err, ErrNodes) {
		t.Errorf("NewNodes(0): %v", err)
	}
	if _, err := NewNodes(3, [][]string{{"r1"}}); !errors.Is(err, ErrDomain) || !strings.Contains(err.Error(), "1 failure domains for 3 nodes") {
		t.Errorf("NewNodes with 1 domain for 3 nodes: %v", err)
	}
}

func TestLevelNames(t *testing.T) {
	mk := func(paths ...string) []Node {
		var nodes []Node
		for i, p := range paths {
			nodes = append(nodes, Node{Index: i, Domain: strings.Split(p, "/")})
		}
		return nodes
	}
	tests := []struct {
		nodes []Node
		depth int
		want  []string
	}{
		{nil, 0, []string{"node"}},
		{mk("rack1/enc1", "rack2/enc10"), 2, []string{"rack", "enc", "node"}},
		{mk("rack-a", "rack-b"), 1, []string{"level1", "node"}}, // stems differ: "rack-a" keeps its letters
		{mk("r1/x", "s2/x"), 2, []string{"level1", "x", "node"}},
		{mk("12", "13"), 1, []string{"level1", "node"}},
		{mk("node1", "node2"), 1, []string{"level1", "node"}}, // would clash with the leaf
		{mk("a1/a2", "a3/a4"), 2, []string{"a", "level2", "node"}},
	}
	for _, tt := range tests {
		if got := levelNames(tt.nodes, tt.depth); !slices.Equal(got, tt.want) {
			t.Errorf("levelNames(%v) = %q, want %q", tt.nodes, got, tt.want)
		}
	}
}

func FuzzParseDomains(f *testing.F) {
	for _, s := range []string{"rack1\nrack2", "r1/e1\nr1/e2\nr2/e1", "\n", "a//b", "a\nb/c", " x / y "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDomains(strings.Split(s, "\n"))
		if err != nil {
			if !errors.Is(err, ErrDomain) {
				t.Fatalf("error %v does not wrap ErrDomain", err)
			}
			return
		}
		// Parsed domains are valid input for Build, which must accept them.
		nodes, err := NewNodes(len(d), d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Build(nodes, 2); err != nil {
			t.Fatalf("Build rejects parsed domains %q: %v", d, err)
		}
	})
}
