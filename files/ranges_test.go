package files

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// bits is the model the range set is checked against: one bool a byte.
type bits []bool

func (b bits) ranges() []Range {
	var out []Range
	for i := 0; i < len(b); i++ {
		if !b[i] {
			continue
		}
		j := i
		for j < len(b) && b[j] {
			j++
		}
		out = append(out, Range{int64(i), int64(j - i)})
		i = j
	}
	return out
}

func TestRangesAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 500 {
		const size = 200
		model := make(bits, size)
		var s Ranges
		for range 1 + rng.IntN(12) {
			if rng.IntN(6) == 0 {
				cut := rng.IntN(size)
				s.Truncate(int64(cut))
				for i := cut; i < size; i++ {
					model[i] = false
				}
				continue
			}
			off, n := rng.IntN(size-1), 1+rng.IntN(30)
			n = min(n, size-off)
			s.Add(int64(off), int64(n))
			for i := off; i < off+n; i++ {
				model[i] = true
			}
		}
		if got, want := s.List(), model.ranges(); !slices.Equal(got, want) {
			t.Fatalf("round %d: ranges %v, want %v", round, got, want)
		}
		m := Meta{Path: "f", Type: Regular, Size: size, Partial: true, Ranges: s.List()}
		if err := Check([]Meta{m}); err != nil {
			t.Fatalf("round %d: a built list fails its check: %v", round, err)
		}
	}
}

func TestOverlap(t *testing.T) {
	a := []Range{{0, 10}, {20, 10}, {40, 5}}
	b := []Range{{5, 20}, {29, 12}}
	want := []Range{{5, 5}, {20, 5}, {29, 1}, {40, 1}}
	if got := Overlap(a, b); !slices.Equal(got, want) {
		t.Fatalf("Overlap = %v, want %v", got, want)
	}
	if got := Overlap(b, a); !slices.Equal(got, want) {
		t.Fatalf("Overlap reversed = %v, want %v", got, want)
	}
	if got := Overlap(a, nil); got != nil {
		t.Fatalf("Overlap with nothing = %v", got)
	}
}

func TestHeld(t *testing.T) {
	whole := Meta{Type: Regular, Size: 100}
	part := Meta{Type: Regular, Size: 100, Partial: true, Ranges: []Range{{10, 5}, {50, 20}}}
	empty := Meta{Type: Regular, Size: 100, Partial: true}
	if !slices.Equal(whole.Held(), []Range{{0, 100}}) || whole.HeldBytes() != 100 {
		t.Fatalf("whole file holds %v (%d bytes)", whole.Held(), whole.HeldBytes())
	}
	if part.HeldBytes() != 25 || empty.HeldBytes() != 0 || len(empty.Held()) != 0 {
		t.Fatalf("partial files hold %d and %d bytes", part.HeldBytes(), empty.HeldBytes())
	}
	if got := Bytes([]Meta{whole, part, empty, {Type: Dir}}); got != 125 {
		t.Fatalf("Bytes = %d, want 125", got)
	}
}

func TestCheckRanges(t *testing.T) {
	bad := map[string]Meta{
		"overlapping": {Path: "f", Type: Regular, Size: 100, Partial: true, Ranges: []Range{{0, 10}, {5, 10}}},
		"touching":    {Path: "f", Type: Regular, Size: 100, Partial: true, Ranges: []Range{{0, 10}, {10, 10}}},
		"unsorted":    {Path: "f", Type: Regular, Size: 100, Partial: true, Ranges: []Range{{50, 10}, {0, 10}}},
		"past size":   {Path: "f", Type: Regular, Size: 100, Partial: true, Ranges: []Range{{95, 10}}},
		"empty range": {Path: "f", Type: Regular, Size: 100, Partial: true, Ranges: []Range{{5, 0}}},
		"negative":    {Path: "f", Type: Regular, Size: 100, Partial: true, Ranges: []Range{{-5, 10}}},
		"overflow":    {Path: "f", Type: Regular, Size: 100, Partial: true, Ranges: []Range{{1 << 62, 1 << 62}}},
		"not partial": {Path: "f", Type: Regular, Size: 100, Ranges: []Range{{0, 10}}},
		"a directory": {Path: "f", Type: Dir, Partial: true},
	}
	for name, m := range bad {
		if err := Check([]Meta{m}); err == nil {
			t.Errorf("%s: Check accepted %+v", name, m)
		}
	}
	ok := Meta{Path: "f", Type: Regular, Size: 100, Partial: true, Ranges: []Range{{0, 10}, {90, 10}}}
	if err := Check([]Meta{ok}); err != nil {
		t.Fatalf("Check refused %+v: %v", ok, err)
	}
}
