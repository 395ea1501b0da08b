package layout

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestExpandNodelist(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"node1", []string{"node1"}},
		{"node[01-04,07]", []string{"node01", "node02", "node03", "node04", "node07"}},
		{"n[5]", []string{"n5"}},
		{"n[005]", []string{"n005"}},
		{"a[1-2],b3", []string{"a1", "a2", "b3"}},
		{" a[1-2] , b3 ,c ", []string{"a1", "a2", "b3", "c"}},
		// Padding follows the width of each range's start.
		{"n[8-10]", []string{"n8", "n9", "n10"}},
		{"n[08-10]", []string{"n08", "n09", "n10"}},
		{"n[98-101]", []string{"n98", "n99", "n100", "n101"}},
		{"n[1-02]", []string{"n1", "n2"}},
		{"n[009-011,2]", []string{"n009", "n010", "n011", "n2"}},
		// Whitespace inside brackets around commas.
		{"n[1, 3 ,5]", []string{"n1", "n3", "n5"}},
		// Two groups: row-major, the first group varies slowest.
		{"rack[1-2]-n[1-2]", []string{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
		// Three groups: Slurm varies the last group fastest, then the first,
		// then the second.
		{"a[1-2]b[1-2]c[1-2]", []string{
			"a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2",
			"a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2",
		}},
		// Text after the last group, and no prefix at all.
		{"n[1-2].ib", []string{"n1.ib", "n2.ib"}},
		{"[1-3]", []string{"1", "2", "3"}},
		{"n[1][2]", []string{"n12"}},
		{"10.0.0.[1-2]", []string{"10.0.0.1", "10.0.0.2"}},
		// Duplicates are kept as written.
		{"n1,n1", []string{"n1", "n1"}},
		{"n[1-2,2]", []string{"n1", "n2", "n2"}},
		{"n-0_a.b", []string{"n-0_a.b"}},
		// Site names with hyphens before the brackets, several ranges in
		// one group, and a plain host after a group (SLURM_JOB_NODELIST
		// as Slurm prints it for a mixed allocation).
		{"gpu-a100-[001-002],cpu-[7]", []string{"gpu-a100-001", "gpu-a100-002", "cpu-7"}},
		{"node[1-3,5-6]", []string{"node1", "node2", "node3", "node5", "node6"}},
		{"node[01-02],login", []string{"node01", "node02", "login"}},
	}
	for _, tt := range tests {
		got, err := ExpandNodelist(tt.in)
		if err != nil {
			t.Errorf("ExpandNodelist(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("ExpandNodelist(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExpandNodelistErrors(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"a,,b", "element 2 is empty"},
		{"a,b,", "element 3 is empty"},
		{",a", "element 1 is empty"},
		{"n[1-2", "missing ']'"},
		{"n1-2]", "unbalanced ']'"},
		{"n[1-[2]]", "nested '['"},
		{"n[]", "empty range"},
		{"n[1,,2]", "empty range"},
		{"n[3-1]", "descending range 3-1"},
		{"n[1-]", "needs a start and an end"},
		{"n[-1]", "needs a start and an end"},
		{"n[a-b]", "is not a number"},
		{"n[1-2-3]", "is not a number"},
		{"n[+1]", "is not a number"},
		{"n[1x2]", "is not a number"},
		{"n[1234567890123456789]", "too large"},
		{"n[0-99999999]", "more than 1048576 hosts"},
		{"a[0-1023]b[0-1024]", "more than 1048576 hosts"},
		{"a[0-999999],b[0-999999]", "more than 1048576 hosts"},
		{"n 1", "invalid character ' '"},
		{"n1:7411", "invalid character ':'"},
		{"n@[1-2]", "invalid character '@'"},
		{"n[1-2]/x", "invalid character '/'"},
		{strings.Repeat("x", 300), "longer than 255 bytes"},
		{strings.Repeat("x", 250) + "[1-100000]", "longer than 255 bytes"},
	}
	for _, tt := range tests {
		got, err := ExpandNodelist(tt.in)
		if err == nil {
			t.Errorf("ExpandNodelist(%q) = %d hosts, want error containing %q", short(tt.in), len(got), tt.want)
			continue
		}
		if !errors.Is(err, ErrNodelist) {
			t.Errorf("ExpandNodelist(%q) error %v does not wrap ErrNodelist", short(tt.in), err)
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ExpandNodelist(%q) error %q, want it to contain %q", short(tt.in), err, tt.want)
		}
	}
}

func TestExpandNodelistLarge(t *testing.T) {
	// Exactly at the cap is fine; the byte cap stops long names earlier.
	got, err := ExpandNodelist("n[0-1048575]")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxNodelistHosts || got[0] != "n0" || got[len(got)-1] != "n1048575" {
		t.Fatalf("got %d hosts, first %q last %q", len(got), got[0], got[len(got)-1])
	}
	if _, err := ExpandNodelist(strings.Repeat("y", 100) + "[0-999999]"); err == nil || !strings.Contains(err.Error(), "bytes of host names") {
		t.Fatalf("100-byte names x 1e6: err = %v, want the byte cap", err)
	}
}

func FuzzExpandNodelist(f *testing.F) {
	for _, s := range []string{
		"node[01-04,07]", "a[1-2],b3", "rack[1-2]-n[1-2]", "n[5]", " a , b ",
		"n[3-1]", "n[", "n]", "a,,b", "a[1-2]b[3-4]c[5-6]", "n[1-2].ib", "[0-9]",
		"n[00-10]", "n[18446744073709551615]", "x[0-99999999]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Small caps keep each run fast; the code paths are the same.
		got, err := expandNodelist(s, 4096, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrNodelist) {
				t.Fatalf("error %v does not wrap ErrNodelist", err)
			}
			return
		}
		if len(got) == 0 || len(got) > 4096 {
			t.Fatalf("%d hosts", len(got))
		}
		for _, h := range got {
			if h == "" || len(h) > maxHostLen || checkHostChars(h) != nil {
				t.Fatalf("bad host %q from %q", h, s)
			}
		}
		// A list of the expanded names expands to itself.
		again, err := expandNodelist(strings.Join(got, ","), 4096, 1<<20)
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("re-expanding %q: %v, %q", got, err, again)
		}
	})
}

func ExampleExpandNodelist() {
	hosts, err := ExpandNodelist("node[01-03,07],login1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(hosts)
	// Output: [node01 node02 node03 node07 login1]
}
