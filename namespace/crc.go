package namespace

// A holder checks a file against its recorded CRC32C and gives each of its
// blocks a CRC32C of its own in one pass: the whole file's CRC32C is put
// together from its blocks' (crcCombine), not computed over the bytes
// again. CRC32C is linear over GF(2), so appending len bytes to a message
// changes its CRC by a linear map of the CRC alone: a 32×32 bit matrix,
// the len-fold power of the one-zero-bit step, found by repeated squaring.

// gf2Matrix is a linear map of 32-bit vectors: row i is the image of bit i.
type gf2Matrix [32]uint32

func (m *gf2Matrix) times(v uint32) uint32 {
	var sum uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			sum ^= m[i]
		}
	}
	return sum
}

// square returns m·m.
func (m *gf2Matrix) square() *gf2Matrix {
	var sq gf2Matrix
	for i := range sq {
		sq[i] = m.times(m[i])
	}
	return &sq
}

// zerosOperator returns the map that appending n zero bytes applies to a
// CRC32C register.
func zerosOperator(n int64) *gf2Matrix {
	// One zero bit: shift right, folding in the (reflected) polynomial.
	var bit gf2Matrix
	bit[0] = castagnoliPoly
	for i := 1; i < 32; i++ {
		bit[i] = 1 << (i - 1)
	}
	op := &gf2Matrix{} // the identity, then n bytes' worth of steps
	for i := range op {
		op[i] = 1 << i
	}
	for p := bit.square().square().square(); n > 0; n, p = n>>1, p.square() {
		if n&1 != 0 {
			op = op.compose(p)
		}
	}
	return op
}

// compose returns the map that applies m, then p.
func (m *gf2Matrix) compose(p *gf2Matrix) *gf2Matrix {
	var c gf2Matrix
	for i := range c {
		c[i] = p.times(m[i])
	}
	return &c
}

// castagnoliPoly is CRC32C's polynomial, bit-reversed as hash/crc32 uses
// it.
const castagnoliPoly = 0x82f63b78

// blockOperator is zerosOperator(blockSize), the one every full block
// needs.
var blockOperator = zerosOperator(blockSize)

// crcCombine returns the CRC32C of a message A followed by a message B of
// length lenB, from A's CRC32C and B's (as hash/crc32 computes them).
func crcCombine(crcA, crcB uint32, lenB int64) uint32 {
	op := blockOperator
	if lenB != blockSize {
		op = zerosOperator(lenB)
	}
	return op.times(crcA) ^ crcB
}
