package crc32c

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCombine checks the GF(2) arithmetic against hash/crc32 over the
// concatenation, for lengths around every power of two that matters, a
// 1 MiB block (a holder's) and odd ones, empty included.
func TestCombine(t *testing.T) {
	const block = 1 << 20
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 3*block)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	for _, c := range [][2]int{{0, 0}, {0, 5}, {7, 0}, {1, 1}, {3, 8}, {100, 3}, {4096, 1 << 15}, {1 << 16, 3},
		{block, block}, {block, 1}, {3, block}, {block - 1, block + 1}, {2 * block, 12345}} {
		a, b := buf[:c[0]], buf[c[0]:c[0]+c[1]]
		got := Combine(crc32.Checksum(a, tab), crc32.Checksum(b, tab), int64(len(b)))
		if want := crc32.Checksum(buf[:c[0]+c[1]], tab); got != want {
			t.Errorf("%d then %d bytes: combined %08x, want %08x", c[0], c[1], got, want)
		}
	}
}

// TestCombineRandomCuts cuts random prefixes of a buffer in two at random.
func TestCombineRandomCuts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<16)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for range 200 {
		n := rng.IntN(len(buf) + 1)
		cut := 0
		if n > 0 {
			cut = rng.IntN(n + 1)
		}
		a, b := buf[:cut], buf[cut:n]
		if got, want := Combine(Checksum(a), Checksum(b), int64(len(b))), Checksum(buf[:n]); got != want {
			t.Fatalf("combine at %d of %d: %08x, want %08x", cut, n, got, want)
		}
	}
}

// FuzzCombine checks the same for any two messages.
func FuzzCombine(f *testing.F) {
	f.Add([]byte("hello"), []byte(", world"))
	f.Add([]byte{}, []byte{0})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		got := Combine(Checksum(a), Checksum(b), int64(len(b)))
		if want := Checksum(append(append([]byte{}, a...), b...)); got != want {
			t.Fatalf("combined %08x, want %08x", got, want)
		}
	})
}

func TestZeros(t *testing.T) {
	zeros := make([]byte, 1<<20+5)
	for _, prefix := range [][]byte{nil, []byte("x"), []byte("checkpoint data")} {
		for _, n := range []int{0, 1, 2, 7, 8, 9, 255, 4096, 1<<20 + 5} {
			want := Update(Checksum(prefix), zeros[:n])
			if got := Zeros(Checksum(prefix), int64(n)); got != want {
				t.Errorf("%q + %d zeros: %08x, want %08x", prefix, n, got, want)
			}
		}
	}
	// A known value: CRC32C of 32 zero bytes (RFC 3720 B.4 test vector).
	if got := Zeros(0, 32); got != 0x8a9136aa {
		t.Errorf("CRC32C(32 zero bytes) = %08x, want 8a9136aa", got)
	}
}

// BenchmarkCombine puts a 1 MiB block's CRC32C after another's, as a
// holder does for every block it checks.
func BenchmarkCombine(b *testing.B) {
	c := uint32(0x12345678)
	for b.Loop() {
		c = Combine(c, 0x9abcdef0, 1<<20)
	}
}

// TestReadAt: a read in blocks gives the bytes and their CRC32C, for sizes
// around its block, and fails with the reader.
func TestReadAt(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]byte, 3*readBlock+77)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for _, c := range [][2]int{{0, 0}, {5, 1}, {0, readBlock}, {1, readBlock + 1}, {77, 3 * readBlock}} {
		p := make([]byte, c[1])
		crc, err := ReadAt(bytes.NewReader(src), p, int64(c[0]))
		if err != nil || !bytes.Equal(p, src[c[0]:c[0]+c[1]]) || crc != Checksum(p) {
			t.Errorf("%d bytes at %d: crc %08x, %v", c[1], c[0], crc, err)
		}
	}
	if _, err := ReadAt(bytes.NewReader(src), make([]byte, 100), int64(len(src))-10); err == nil {
		t.Error("a read past the end succeeded")
	}
}
