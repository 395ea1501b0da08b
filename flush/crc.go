package flush

import "hash/crc32"

// castagnoli is the CRC32C table. hash/crc32 switches to the SSE4.2 / ARMv8
// instructions when it sees this polynomial, so updates run at memory speed.
// It is an immutable lookup table, not mutable package state.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcPoly is the Castagnoli polynomial in the reflected bit order hash/crc32
// uses: bit 31 is x^0.
const crcPoly = 0x82f63b78

// crcUpdate returns the CRC32C of the bytes hashed so far (crc) followed by p.
func crcUpdate(crc uint32, p []byte) uint32 {
	return crc32.Update(crc, castagnoli, p)
}

// gfMul returns a(x)·b(x) mod P(x) in the reflected representation. This
// and gfShift are the algebra behind zlib's crc32_combine: they let a file be
// hashed in independent ranges by several streams, and let holes of a sparse
// file be hashed without reading gigabytes of zeros.
func gfMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// gfShift returns x^(8n) mod P(x): the operator that appends n zero bytes to
// a raw (unconditioned) CRC register. O(log n) multiplications.
func gfShift(n int64) uint32 {
	result := uint32(1) << 31 // x^0
	sq := uint32(1) << 23     // x^8: one byte
	for n > 0 {
		if n&1 != 0 {
			result = gfMul(result, sq)
		}
		sq = gfMul(sq, sq)
		n >>= 1
	}
	return result
}

// crcCombine returns the CRC32C of A‖B given crcA = CRC32C(A), crcB =
// CRC32C(B) and lenB = len(B). The pre- and post-inversion of the standard
// CRC cancel out, so this is the same formula as zlib's crc32_combine.
func crcCombine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA ^ crcB
	}
	return gfMul(gfShift(lenB), crcA) ^ crcB
}

// crcZeros returns the CRC32C of the bytes hashed so far (crc) followed by
// n zero bytes, without touching n bytes of memory.
func crcZeros(crc uint32, n int64) uint32 {
	if n <= 0 {
		return crc
	}
	// Zero input bytes only shift the raw register, so undo the
	// post-inversion, shift, and invert again.
	return ^gfMul(gfShift(n), ^crc)
}
