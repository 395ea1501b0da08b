package flush

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRCCombine checks the GF(2) arithmetic against hash/crc32 over the
// concatenation, for lengths around every power of two that matters.
func TestCRCCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<16+3)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	for _, split := range []int{0, 1, 3, 8, 100, 4096, 1 << 15, len(buf) - 1, len(buf)} {
		a, b := buf[:split], buf[split:]
		got := crcCombine(crc32.Checksum(a, tab), crc32.Checksum(b, tab), int64(len(b)))
		if want := crc32.Checksum(buf, tab); got != want {
			t.Errorf("split at %d: combine %08x, want %08x", split, got, want)
		}
	}
}

func TestCRCZeros(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	zeros := make([]byte, 1<<20+5)
	for _, prefix := range [][]byte{nil, []byte("x"), []byte("checkpoint data")} {
		for _, n := range []int{0, 1, 2, 7, 8, 9, 255, 4096, 1<<20 + 5} {
			want := crc32.Update(crc32.Checksum(prefix, tab), tab, zeros[:n])
			if got := crcZeros(crc32.Checksum(prefix, tab), int64(n)); got != want {
				t.Errorf("%q + %d zeros: %08x, want %08x", prefix, n, got, want)
			}
		}
	}
	// A known value: CRC32C of 32 zero bytes (RFC 3720 B.4 test vector).
	if got := crcZeros(0, 32); got != 0x8a9136aa {
		t.Errorf("CRC32C(32 zero bytes) = %08x, want 8a9136aa", got)
	}
}

func BenchmarkCRC32C(b *testing.B) {
	buf := make([]byte, DefaultBufferSize)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	crcUpdate(0, buf) // warm-up: fault the buffer in
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	var c uint32
	for b.Loop() {
		c = crcUpdate(c, buf)
	}
	_ = c
}
