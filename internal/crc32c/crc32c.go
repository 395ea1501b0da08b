// Package crc32c is the checksum every scrfs file format and wire message
// carries, CRC32C (Castagnoli, as hash/crc32 computes it, which uses the
// SSE4.2 / ARMv8 instructions for this polynomial), and the GF(2) algebra
// that puts a file's CRC32C together from its pieces' (read out of order by
// XOR and RS, by several streams in a flush, block by block by a holder) and
// hashes a sparse file's holes without reading their zeros; and a read
// that takes the CRC32C of what it reads while the bytes are in cache.
package crc32c

import "hash/crc32"

// table is the CRC32C table: an immutable lookup table.
var table = crc32.MakeTable(crc32.Castagnoli)

// poly is the Castagnoli polynomial in the reflected bit order hash/crc32
// uses: bit 31 is x^0.
const poly = 0x82f63b78

// Checksum returns the CRC32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, table) }

// Update returns the CRC32C of the bytes hashed so far (crc) followed by b.
func Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, table, b) }

// Combine returns the CRC32C of A‖B given crcA = CRC32C(A), crcB =
// CRC32C(B) and lenB = len(B). The pre- and post-inversion of the standard
// CRC cancel out, so this is zlib's crc32_combine.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA ^ crcB
	}
	return gfMul(gfShift(lenB), crcA) ^ crcB
}

// Zeros returns the CRC32C of the bytes hashed so far (crc) followed by n
// zero bytes, without touching n bytes of memory.
func Zeros(crc uint32, n int64) uint32 {
	if n <= 0 {
		return crc
	}
	// Zero input bytes only shift the raw register, so undo the
	// post-inversion, shift, and invert again.
	return ^gfMul(gfShift(n), ^crc)
}

// gfMul returns a(x)·b(x) mod P(x) in the reflected representation.
func gfMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// pow2Shifts[i] is x^(8·2^i) mod P(x): appending 2^i zero bytes. Computed
// once, so that the lengths combined most (blocks and pieces, powers of two)
// cost one multiplication.
var pow2Shifts = func() (t [63]uint32) {
	sq := uint32(1) << 23 // x^8: one byte
	for i := range t {
		t[i] = sq
		sq = gfMul(sq, sq)
	}
	return t
}()

// gfShift returns x^(8n) mod P(x): the operator that appends n zero bytes to
// a raw (unconditioned) CRC register. One multiplication per bit set in n.
func gfShift(n int64) uint32 {
	result := uint32(1) << 31 // x^0
	for i := 0; n > 0; i, n = i+1, n>>1 {
		if n&1 != 0 {
			result = gfMul(result, pow2Shifts[i])
		}
	}
	return result
}
