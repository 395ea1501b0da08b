package schemes

import (
	"errors"
	"testing"
)

func TestParams(t *testing.T) {
	valid := []Params{
		{Kind: Single, Size: 1},
		{Kind: Partner, Size: 2, Replicas: 1},
		{Kind: Partner, Size: 8, Replicas: 7},
		{Kind: XOR, Size: 2},
		{Kind: RS, Size: 2, Parity: 1},
		{Kind: RS, Size: 200, Parity: 56},
		{Kind: XOR, Size: 8, PieceSize: MinPieceSize},
	}
	for _, p := range valid {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	invalid := []Params{
		{Kind: Single, Size: 0},
		{Kind: Partner, Size: 3, Replicas: 0},
		{Kind: Partner, Size: 3, Replicas: 3},
		{Kind: XOR, Size: 1},
		{Kind: RS, Size: 4, Parity: 4},
		{Kind: RS, Size: 200, Parity: 57},
		{Kind: XOR, Size: 4, PieceSize: MinPieceSize - 1},
		{Kind: 9, Size: 4},
	}
	for _, p := range invalid {
		if err := p.Validate(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%+v: %v, want ErrInvalidParams", p, err)
		}
	}
	tol := map[Kind]int{Single: 0, Partner: 3, XOR: 1, RS: 2}
	for k, want := range tol {
		p := Params{Kind: k, Size: 6, Replicas: 3, Parity: 2}
		if got := p.Tolerance(); got != want {
			t.Errorf("%s tolerance %d, want %d", k, got, want)
		}
		back, err := ParseKind(k.String())
		if err != nil || back != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), back, err)
		}
	}
	if _, err := ParseKind("raid6"); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("ParseKind accepted raid6: %v", err)
	}
	m := Member{Rank: 3, Set: SetInfo{Group: 1, Groups: 4, Nodes: []int{9, 8, 7, 6}}}
	if got := fileName(RS, m.Set, m.Rank); got != "6.rs.grp_2_of_4.mem_4_of_4.redset" {
		t.Errorf("file name %q", got)
	}
}
