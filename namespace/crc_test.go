package namespace

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRCCombine: the CRC32C of A followed by B, put together from theirs,
// is the CRC32C of the concatenation, for lengths around a block and odd
// ones, empty included.
func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 3*blockSize)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for _, c := range [][2]int{{0, 0}, {0, 5}, {7, 0}, {1, 1}, {100, 3}, {blockSize, blockSize}, {blockSize, 1},
		{3, blockSize}, {blockSize - 1, blockSize + 1}, {2 * blockSize, 12345}} {
		a, b := buf[:c[0]], buf[c[0]:c[0]+c[1]]
		got := crcCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), int64(len(b)))
		if want := crc32.Checksum(buf[:c[0]+c[1]], castagnoli); got != want {
			t.Errorf("%d then %d bytes: combined %08x, want %08x", c[0], c[1], got, want)
		}
	}
}

// FuzzCRCCombine checks the same for any two messages.
func FuzzCRCCombine(f *testing.F) {
	f.Add([]byte("hello"), []byte(", world"))
	f.Add([]byte{}, []byte{0})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		got := crcCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), int64(len(b)))
		if want := crc32.Checksum(append(append([]byte{}, a...), b...), castagnoli); got != want {
			t.Fatalf("combined %08x, want %08x", got, want)
		}
	})
}
