package transfer

import "testing"

// TestAssignedParts: a job of M nodes fetching what N flushed takes every
// part once, node j a run of consecutive parts; the runs differ by one
// part at most and are in node order (a resharded load's rank j reads
// node j's).
func TestAssignedParts(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for m := 1; m <= 9; m++ {
			next := 0
			for j := range m {
				parts := assignedParts(n, m, j)
				for k, p := range parts {
					if p != next {
						t.Fatalf("%d nodes fetching %d parts: node %d takes %v, want consecutive parts from %d", m, n, j, parts, next)
					}
					next++
					if m < n && k == 0 && len(parts) != n/m && len(parts) != n/m+1 {
						t.Fatalf("%d nodes fetching %d parts: node %d takes %d of them", m, n, j, len(parts))
					}
				}
			}
			if next != n {
				t.Fatalf("%d nodes fetching %d parts take %d of them", m, n, next)
			}
		}
	}
	if got := assignedParts(4, 2, 1); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("node 1 of 2 takes parts %v of 4, want [2 3]", got)
	}
}
