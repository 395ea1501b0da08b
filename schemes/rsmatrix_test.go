package schemes

import (
	"fmt"
	"slices"
	"testing"

	"github.com/klauspost/reedsolomon"
	"github.com/scrfs/scrfs/layout"
)

// libCoefficients reads the library's parity coefficients by encoding unit
// vectors: the parity bytes of data shard q = [1] are column q of the
// checksum rows.
func libCoefficients(t testing.TB, p, k int) [][]byte {
	t.Helper()
	enc, err := reedsolomon.New(p, k)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]byte, k)
	for i := range rows {
		rows[i] = make([]byte, p)
	}
	for q := 0; q < p; q++ {
		parity := make([][]byte, k)
		for i := range parity {
			parity[i] = make([]byte, 1)
		}
		if err := enc.EncodeIdx([]byte{1}, q, parity); err != nil {
			t.Fatal(err)
		}
		for i := range parity {
			rows[i][q] = parity[i][0]
		}
	}
	return rows
}

// TestRSCoefficientsPinned pins the seed document's matrix for p=4, k=2: if
// a library upgrade changed its default matrix, existing redundancy files
// would silently become undecodable.
func TestRSCoefficientsPinned(t *testing.T) {
	got := libCoefficients(t, 4, 2)
	want := [][]byte{{27, 28, 18, 20}, {28, 27, 20, 18}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("checksum row %d: %v, redset's %v", i, got[i], want[i])
		}
	}
}

// gf256 is an independent GF(2^8) with redset's polynomial
// x^8+x^4+x^3+x^2+1, used to rebuild redset's matrix from its definition.
type gf256 struct{ exp, log [256]int }

func newGF256() *gf256 {
	g := &gf256{}
	x := 1
	for i := 0; i < 255; i++ {
		g.exp[i] = x
		g.log[x] = i
		x <<= 1
		if x&0x100 != 0 {
			x ^= 0x11d
		}
	}
	return g
}

func (g *gf256) mul(a, b int) int {
	if a == 0 || b == 0 {
		return 0
	}
	return g.exp[(g.log[a]+g.log[b])%255]
}

func (g *gf256) inv(a int) int { return g.exp[(255-g.log[a])%255] }

// redsetMatrix builds the (p+k) x p Vandermonde matrix V[r][c] = r^c and
// right-multiplies by the inverse of its top square, as redset's
// normalize_vandermonde does with column operations, returning the k
// checksum rows.
func redsetMatrix(g *gf256, p, k int) [][]int {
	v := make([][]int, p+k)
	for r := range v {
		v[r] = make([]int, p)
		x := 1
		for c := 0; c < p; c++ {
			v[r][c] = x
			x = g.mul(x, r)
		}
	}
	// Column-wise Gauss-Jordan on the whole matrix until the top is I.
	for c := 0; c < p; c++ {
		piv := c
		for v[c][piv] == 0 {
			piv++
		}
		for r := range v {
			v[r][c], v[r][piv] = v[r][piv], v[r][c]
		}
		s := g.inv(v[c][c])
		for r := range v {
			v[r][c] = g.mul(v[r][c], s)
		}
		for c2 := 0; c2 < p; c2++ {
			if c2 == c || v[c][c2] == 0 {
				continue
			}
			f := v[c][c2]
			for r := range v {
				v[r][c2] ^= g.mul(f, v[r][c])
			}
		}
	}
	return v[p:]
}

// TestRSMatrixIsRedsets compares the library's coefficients with redset's
// construction for many set shapes, not just the pinned one.
func TestRSMatrixIsRedsets(t *testing.T) {
	g := newGF256()
	maxP := 20
	if testing.Short() {
		maxP = 10
	}
	for p := 2; p <= maxP; p++ {
		for k := 1; k < p && k <= 4; k++ {
			want := redsetMatrix(g, p, k)
			got := libCoefficients(t, p, k)
			for i := range want {
				for q := range want[i] {
					if int(got[i][q]) != want[i][q] {
						t.Fatalf("p=%d k=%d: coefficient (%d,%d) is %d, redset's %d", p, k, i, q, got[i][q], want[i][q])
					}
				}
			}
		}
	}
	if w := redsetMatrix(g, 4, 2); fmt.Sprint(w) != "[[27 28 18 20] [28 27 20 18]]" {
		t.Fatalf("independent construction gives %v for p=4 k=2", w)
	}
}

// TestRSPlacement checks the rank arithmetic against the seed's example and
// the closed-form data index against counting.
func TestRSPlacement(t *testing.T) {
	// Seed: process 0 stores c0 in the first row and c1 in the second;
	// in row 0 processes 0 and 3 contribute zeros.
	if layout.RSHolder(4, 0, 0) != 0 || layout.RSHolder(4, 1, 1) != 0 || layout.RSHolder(4, 0, 1) != 3 {
		t.Fatal("holder placement differs from the seed example")
	}
	for p := 2; p <= 12; p++ {
		for k := 1; k < p; k++ {
			for q := 0; q < p; q++ {
				next := 0
				for j := 0; j < p; j++ {
					c := rsChecksum(q, j, p, k)
					if c >= 0 {
						if layout.RSHolder(p, j, c) != q {
							t.Fatalf("p=%d k=%d: member %d holds checksum %d of row %d, holder says %d", p, k, q, c, j, layout.RSHolder(p, j, c))
						}
						continue
					}
					if got := rsDataIndex(q, j, p, k); got != next {
						t.Fatalf("p=%d k=%d q=%d row %d: data index %d, want %d", p, k, q, j, got, next)
					}
					next++
				}
				if next != p-k {
					t.Fatalf("p=%d k=%d q=%d: %d data rows", p, k, q, next)
				}
			}
		}
	}
}
