package layout

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestPartnerHoldersAndSources(t *testing.T) {
	tests := []struct {
		p, rank, r       int
		holders, sources []int
	}{
		{4, 0, 1, []int{1}, []int{3}},
		{4, 3, 1, []int{0}, []int{2}},
		{4, 0, 2, []int{1, 2}, []int{3, 2}},
		{4, 2, 3, []int{3, 0, 1}, []int{1, 0, 3}},
		{2, 1, 1, []int{0}, []int{0}},
		{8, 6, 3, []int{7, 0, 1}, []int{5, 4, 3}},
		// Outside the preconditions: nil, never a panic.
		{4, 0, 0, nil, nil},
		{4, 0, 4, nil, nil},
		{4, 4, 1, nil, nil},
		{4, -1, 1, nil, nil},
		{1, 0, 1, nil, nil},
		{0, 0, 1, nil, nil},
	}
	for _, tt := range tests {
		if got := PartnerHolders(tt.p, tt.rank, tt.r); !slices.Equal(got, tt.holders) {
			t.Errorf("PartnerHolders(%d, %d, %d) = %v, want %v", tt.p, tt.rank, tt.r, got, tt.holders)
		}
		if got := PartnerSources(tt.p, tt.rank, tt.r); !slices.Equal(got, tt.sources) {
			t.Errorf("PartnerSources(%d, %d, %d) = %v, want %v", tt.p, tt.rank, tt.r, got, tt.sources)
		}
	}
	// Holders and sources are each other's inverse: rank stores a copy of
	// s exactly when rank is one of s's holders.
	for p := 2; p <= 9; p++ {
		for r := 1; r < p; r++ {
			for rank := 0; rank < p; rank++ {
				for _, src := range PartnerSources(p, rank, r) {
					if !slices.Contains(PartnerHolders(p, src, r), rank) {
						t.Fatalf("p=%d r=%d: %d stores %d's copy but is not its holder", p, r, rank, src)
					}
				}
			}
		}
	}
}

func TestNeighbours(t *testing.T) {
	tests := []struct{ p, rank, left, right int }{
		{4, 0, 3, 1},
		{4, 3, 2, 0},
		{2, 0, 1, 1},
		{1, 0, 0, 0},
		{4, 4, -1, -1},
		{4, -1, -1, -1},
		{0, 0, -1, -1},
	}
	for _, tt := range tests {
		if l, r := Left(tt.p, tt.rank), Right(tt.p, tt.rank); l != tt.left || r != tt.right {
			t.Errorf("Left/Right(%d, %d) = %d/%d, want %d/%d", tt.p, tt.rank, l, r, tt.left, tt.right)
		}
	}
}

func TestRSHolderSeedExample(t *testing.T) {
	// redset's description, p=4 and k=2: "process 0 stores c0 in the first
	// row of chunks and c1 in the second row"; in the first row processes 0
	// and 3 store checksums; in the second row process 1 stores c0 and
	// process 0 stores c1.
	if got := RSHolder(4, 0, 0); got != 0 {
		t.Errorf("row 0 c0 on %d, want 0", got)
	}
	if got := RSHolder(4, 1, 1); got != 0 {
		t.Errorf("row 1 c1 on %d, want 0", got)
	}
	if got := RSHolder(4, 0, 1); got != 3 {
		t.Errorf("row 0 c1 on %d, want 3", got)
	}
	if got := RSHolder(4, 1, 0); got != 1 {
		t.Errorf("row 1 c0 on %d, want 1", got)
	}
	// "A process also stores copies of the meta data for each of its k
	// left-most neighbors": process 0's header holds 3 and 2, so process
	// 3's metadata is kept by 0 and 1.
	if got := PartnerHolders(4, 3, 2); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("PartnerHolders(4, 3, 2) = %v, want [0 1]", got)
	}
	if got := PartnerSources(4, 0, 2); !slices.Equal(got, []int{3, 2}) {
		t.Errorf("process 0 keeps metadata of %v, want [3 2]", got)
	}
}

func TestRSHolderProperties(t *testing.T) {
	for p := 2; p <= 12; p++ {
		for k := 1; k < p; k++ {
			stored := make([]int, p)
			for row := 0; row < p; row++ {
				holders := map[int]bool{}
				for i := 0; i < k; i++ {
					h := RSHolder(p, row, i)
					if (h+i)%p != row {
						t.Fatalf("p=%d: member %d holds c%d of row %d", p, h, i, row)
					}
					holders[h] = true
					stored[h]++
				}
				// k distinct members hold a row's checksums; the other
				// p-k contribute data.
				if len(holders) != k {
					t.Fatalf("p=%d k=%d row %d: %d distinct holders", p, k, row, len(holders))
				}
			}
			for m, n := range stored {
				if n != k {
					t.Fatalf("p=%d k=%d: member %d stores %d checksums, want k", p, k, m, n)
				}
			}
		}
	}
	for _, bad := range [][3]int{{0, 0, 0}, {4, 4, 0}, {4, -1, 0}, {4, 0, -1}} {
		if RSHolder(bad[0], bad[1], bad[2]) != -1 {
			t.Errorf("RSHolder%v did not return -1", bad)
		}
	}
}

func TestCheckScheme(t *testing.T) {
	tests := []struct {
		s       Scheme
		setSize int
		want    string // "" = allowed
	}{
		{Scheme{Kind: KindSingle}, 1, ""},
		{Scheme{Kind: KindSingle}, 8, ""},
		{Scheme{Kind: KindXOR}, 2, ""},
		{Scheme{Kind: KindXOR, Parity: 99}, 8, ""}, // parity is rs-only
		{Scheme{Kind: KindXOR}, 1, "redundancy.scheme = xor needs sets of at least 2 nodes; the smallest set has 1"},
		{Scheme{Kind: KindPartner, Replicas: 1}, 2, ""},
		{Scheme{Kind: KindPartner, Replicas: 3}, 4, ""},
		{Scheme{Kind: KindPartner, Replicas: 4}, 4, "redundancy.replicas = 4 needs sets of at least 5 nodes (1 <= r <= p-1); the smallest set has 4"},
		{Scheme{Kind: KindPartner, Replicas: 0}, 4, "redundancy.replicas = 0 must be at least 1"},
		{Scheme{Kind: KindRS, Parity: 3}, 4, ""},
		{Scheme{Kind: KindRS, Parity: 4}, 4, "redundancy.parity = 4 needs sets of at least 5 nodes (1 <= k < p); the smallest set has 4"},
		{Scheme{Kind: KindRS, Parity: 0}, 4, "redundancy.parity = 0 must be at least 1"},
		{Scheme{Kind: KindRS, Parity: 6}, 250, ""},
		{Scheme{Kind: KindRS, Parity: 7}, 250, "redundancy.parity = 7 allows sets of at most 249 nodes (p + k <= 256 in GF(2^8)); the largest set has 250"},
		{Scheme{Kind: "raid6"}, 4, `redundancy.scheme = "raid6" is not one of single, partner, xor, rs`},
		{Scheme{Kind: KindXOR}, 0, "the smallest set has 0"},
	}
	for _, tt := range tests {
		err := checkScheme(tt.s, tt.setSize, tt.setSize)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckScheme(%v, %d): %v", tt.s, tt.setSize, err)
		case tt.want != "" && (err == nil || !errors.Is(err, ErrScheme) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckScheme(%v, %d) = %v, want ErrScheme containing %q", tt.s, tt.setSize, err, tt.want)
		}
	}
}

func TestLayoutCheckScheme(t *testing.T) {
	// 511 nodes in sets of 255 and 256: parity 1 fits the smallest set but
	// not the largest (256 + 1 > 256).
	l, err := Build(plainNodes(t, 511), 255)
	if err != nil {
		t.Fatal(err)
	}
	if l.MinSetSize() != 255 || l.MaxSetSize() != 256 {
		t.Fatalf("set sizes %d..%d", l.MinSetSize(), l.MaxSetSize())
	}
	if err := checkScheme(Scheme{Kind: KindRS, Parity: 1}, l.MinSetSize(), l.MinSetSize()); err != nil {
		t.Fatalf("smallest set alone: %v", err)
	}
	if err := l.CheckScheme(Scheme{Kind: KindRS, Parity: 1}); err == nil || !strings.Contains(err.Error(), "the largest set has 256") {
		t.Fatalf("Layout.CheckScheme = %v, want the largest set named", err)
	}
	if err := l.CheckScheme(Scheme{Kind: KindXOR}); err != nil {
		t.Fatal(err)
	}
}

func TestSchemeString(t *testing.T) {
	for s, want := range map[Scheme]string{
		{Kind: KindXOR}:                  "xor",
		{Kind: KindSingle, Replicas: 2}:  "single",
		{Kind: KindPartner, Replicas: 2}: "partner(replicas=2)",
		{Kind: KindRS, Parity: 3}:        "rs(parity=3)",
	} {
		if got := s.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", s, got, want)
		}
	}
}
