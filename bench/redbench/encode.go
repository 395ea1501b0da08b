package main

import (
	"crypto/subtle"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/klauspost/reedsolomon"
	"github.com/scrfs/scrfs/bench/internal/job"
)

// encodeSource is the bytes the in-process encoders read, cycled: larger
// than any CPU cache, so the rate is that of encoding from memory, as the
// daemons do from /dev/shm.
const encodeSource = 64 << 20

// encodeRates is (b): bytes of input encoded per second on one core.
type encodeRates struct {
	rs, xor float64
	p, k    int
	bytes   int64 // input bytes per timed pass
}

// measureEncode times, on one goroutine, what the daemons' encoders do to
// the data: reedsolomon.EncodeIdx of each 1 MiB piece into k checksum
// pieces (cleared first) with a p+k code, as an RS member does with its
// contributions, and crypto/subtle.XORBytes of each piece into an
// accumulator, as an XOR member does with what it receives. Each runs over
// total bytes once untimed, then rounds times; the medians are returned.
func measureEncode(p, k int, total int64, rounds int) (encodeRates, error) {
	out := encodeRates{p: p, k: k, bytes: total}
	src := make([]byte, encodeSource)
	rng := rand.NewChaCha8([32]byte{'r', 'e', 'd', 'b', 'e', 'n', 'c', 'h'})
	rng.Read(src)
	// WithMaxGoroutines(1): the rate of one core, the figure the issue
	// quotes; a daemon has more to spare.
	enc, err := reedsolomon.New(p, k, reedsolomon.WithMaxGoroutines(1))
	if err != nil {
		return out, fmt.Errorf("reed-solomon %d+%d: %w", p, k, err)
	}
	parity := make([][]byte, k)
	for i := range parity {
		parity[i] = make([]byte, ioSize)
		clear(parity[i])
	}
	acc := make([]byte, ioSize)
	clear(acc)

	pass := func(f func(piece []byte, i int) error) (time.Duration, error) {
		t0 := time.Now()
		i := 0
		for off := int64(0); off < total; off += ioSize {
			at := int(off % encodeSource) // encodeSource is a multiple of ioSize
			n := int(min(ioSize, total-off))
			if err := f(src[at:at+n], i); err != nil {
				return 0, err
			}
			i++
		}
		return time.Since(t0), nil
	}
	rsPiece := func(piece []byte, i int) error {
		for _, q := range parity {
			clear(q[:len(piece)])
		}
		ps := parity
		if len(piece) < ioSize {
			ps = make([][]byte, k)
			for c := range ps {
				ps[c] = parity[c][:len(piece)]
			}
		}
		return enc.EncodeIdx(piece, i%p, ps)
	}
	xorPiece := func(piece []byte, _ int) error {
		subtle.XORBytes(acc[:len(piece)], acc[:len(piece)], piece)
		return nil
	}
	for _, m := range []struct {
		f    func([]byte, int) error
		rate *float64
	}{{rsPiece, &out.rs}, {xorPiece, &out.xor}} {
		var samples []time.Duration
		for r := 0; r <= rounds; r++ {
			d, err := pass(m.f)
			if err != nil {
				return out, fmt.Errorf("encode: %w", err)
			}
			if r > 0 {
				samples = append(samples, d)
			}
		}
		*m.rate = float64(total) / job.Median(samples).Seconds()
	}
	return out, nil
}
