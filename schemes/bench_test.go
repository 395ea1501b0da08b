package schemes

import (
	"crypto/subtle"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/reedsolomon"

	"github.com/scrfs/scrfs/internal/crc32c"
)

// benchBytes is each member's logical data in the set benchmarks.
const benchBytes = 64 << 20

// benchSet builds a 4-member set with benchBytes of random data per member
// (four files each), on tmpfs like the production cache.
func benchSet(b *testing.B, p Params) *testSet {
	b.Helper()
	ts := newTestSet(b, p)
	for range ts.dirs {
		ts.bufs = append(ts.bufs, NewBuffers())
	}
	rng := rand.New(rand.NewPCG(7, 8))
	buf := make([]byte, benchBytes/4)
	for r := range ts.dirs {
		for f := 0; f < 4; f++ {
			for i := 0; i+8 <= len(buf); i += 8 {
				v := rng.Uint64()
				buf[i], buf[i+1], buf[i+2], buf[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
				buf[i+4], buf[i+5], buf[i+6], buf[i+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
			}
			if err := os.WriteFile(filepath.Join(ts.dirs[r], fmt.Sprintf("shard%d.bin", f)), buf, 0o600); err != nil {
				b.Fatal(err)
			}
		}
	}
	return ts
}

var benchParams = []Params{
	{Kind: Partner, Size: 4, Replicas: 1},
	{Kind: XOR, Size: 4},
	{Kind: RS, Size: 4, Parity: 2},
}

// BenchmarkEncode reports MB/s of logical data per member: all four members
// encode 64 MiB each concurrently per iteration.
func BenchmarkEncode(b *testing.B) {
	for _, p := range benchParams {
		b.Run(p.Kind.String(), func(b *testing.B) {
			ts := benchSet(b, p)
			ts.mustEncode() // warm-up: page cache, first touch of buffers
			b.SetBytes(benchBytes)
			b.ResetTimer()
			for range b.N {
				ts.mustEncode()
			}
		})
	}
}

// BenchmarkRebuild reports MB/s of the lost member's restored logical data
// (one lost member of four).
func BenchmarkRebuild(b *testing.B) {
	for _, p := range benchParams[1:] {
		b.Run(p.Kind.String(), func(b *testing.B) {
			ts := benchSet(b, p)
			ts.mustEncode()
			const lost = 2
			rebuild := func() {
				b.StopTimer()
				ts.lose(lost, false)
				b.StartTimer()
				_, errs := ts.rebuild([]int{lost})
				for r, err := range errs {
					if err != nil {
						b.Fatalf("rank %d: %v", r, err)
					}
				}
			}
			rebuild() // warm-up
			b.SetBytes(benchBytes)
			b.ResetTimer()
			for range b.N {
				rebuild()
			}
		})
	}
}

// BenchmarkKernel measures the per-piece compute of the schemes on 1 MiB
// pieces, to compare with the network (about 3.7 GiB/s here).
func BenchmarkKernel(b *testing.B) {
	const piece = DefaultPieceSize
	src := make([]byte, piece)
	for i := range src {
		src[i] = byte(i * 131)
	}
	dst := make([]byte, piece)
	b.Run("xor", func(b *testing.B) {
		subtle.XORBytes(dst, dst, src)
		b.SetBytes(piece)
		b.ResetTimer()
		for range b.N {
			subtle.XORBytes(dst, dst, src)
		}
	})
	b.Run("crc32c", func(b *testing.B) {
		crc32c.Checksum(src)
		b.SetBytes(piece)
		b.ResetTimer()
		for range b.N {
			crc32c.Checksum(src)
		}
	})
	for _, pk := range [][2]int{{4, 2}, {8, 2}, {16, 4}} {
		p, k := pk[0], pk[1]
		enc, err := reedsolomon.New(p, k)
		if err != nil {
			b.Fatal(err)
		}
		parity := make([][]byte, k)
		for i := range parity {
			parity[i] = make([]byte, piece)
		}
		// SetBytes counts input bytes: one data piece yields k contributions.
		b.Run(fmt.Sprintf("encodeidx/p=%d/k=%d", p, k), func(b *testing.B) {
			enc.EncodeIdx(src, 1, parity)
			b.SetBytes(piece)
			b.ResetTimer()
			for range b.N {
				for i := range parity {
					clear(parity[i])
				}
				if err := enc.EncodeIdx(src, 1, parity); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("reconstruct/p=%d/k=%d", p, k), func(b *testing.B) {
			shards := make([][]byte, p+k)
			required := make([]bool, p+k)
			for i := range shards {
				shards[i] = make([]byte, piece)
			}
			out := make([][]byte, k)
			for i := range out {
				out[i] = make([]byte, 0, piece)
			}
			b.SetBytes(piece * int64(k)) // bytes rebuilt per call
			b.ResetTimer()
			for range b.N {
				for i := 0; i < k; i++ {
					shards[i] = out[i][:0]
					required[i] = true
				}
				if err := enc.ReconstructSome(shards, required); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
