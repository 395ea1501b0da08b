package schemes

import (
	"fmt"
	"sort"
	"sync"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
)

// crcRun is a contiguous range of a file whose CRC32C is known.
type crcRun struct {
	start, n int64
	crc      uint32
}

// fileCRCs assembles per-file CRC32Cs from pieces that arrive in any order,
// each piece at most once. Safe for concurrent use.
type fileCRCs struct {
	mu    sync.Mutex
	sizes []int64
	runs  [][]crcRun // mu protects runs
}

// newFileCRCs tracks the CRC32Cs of the regular files of list. Of a file
// a member holds only ranges of (files.Meta.Partial), it knows the rest
// from the start: zeros.
func newFileCRCs(list []files.Meta) *fileCRCs {
	t := &fileCRCs{}
	for i := range list {
		f := &list[i]
		if f.Type != files.Regular {
			continue
		}
		idx := len(t.sizes)
		t.sizes = append(t.sizes, f.Size)
		t.runs = append(t.runs, nil)
		if !f.Partial {
			continue
		}
		var at int64
		for _, r := range append(f.Ranges, files.Range{Off: f.Size}) {
			if r.Off > at {
				t.addCRC(idx, at, r.Off-at, crc32c.Zeros(0, r.Off-at))
			}
			at = r.End()
		}
	}
	return t
}

// add records that bytes b sit at offset start of file i.
func (t *fileCRCs) add(i int, start int64, b []byte) {
	if len(b) == 0 {
		return
	}
	t.addCRC(i, start, int64(len(b)), crc32c.Checksum(b))
}

// addCRC records that n bytes whose CRC32C is c sit at offset start of
// file i.
func (t *fileCRCs) addCRC(i int, start, n int64, c uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	runs := t.runs[i]
	for j := range runs {
		r := &runs[j]
		if r.start+r.n == start {
			r.crc = crc32c.Combine(r.crc, c, n)
			r.n += n
			// The grown run may now touch the next one.
			for k := range runs {
				if k != j && runs[k].start == r.start+r.n {
					r.crc = crc32c.Combine(r.crc, runs[k].crc, runs[k].n)
					r.n += runs[k].n
					runs = append(runs[:k], runs[k+1:]...)
					break
				}
			}
			t.runs[i] = runs
			return
		}
		if start+n == r.start {
			r.crc = crc32c.Combine(c, r.crc, r.n)
			r.start = start
			r.n += n
			return
		}
	}
	t.runs[i] = append(runs, crcRun{start: start, n: n, crc: c})
}

// sums returns each file's CRC32C, or an error if some file was not covered
// exactly once.
func (t *fileCRCs) sums() ([]uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]uint32, len(t.sizes))
	for i, runs := range t.runs {
		sort.Slice(runs, func(a, b int) bool { return runs[a].start < runs[b].start })
		var crc uint32
		var at int64
		for _, r := range runs {
			if r.start != at {
				return nil, fmt.Errorf("file %d: bytes [%d, %d) not seen", i, at, r.start)
			}
			crc = crc32c.Combine(crc, r.crc, r.n)
			at += r.n
		}
		if at != t.sizes[i] {
			return nil, fmt.Errorf("file %d: saw %d of %d bytes", i, at, t.sizes[i])
		}
		out[i] = crc
	}
	return out, nil
}

// sumBlock is how much of a sum (XOR's parity, RS's checksums) is
// computed before the CRC32C of those bytes is taken: with the operands,
// well inside a core's L2 cache. In microbenchmarks on the project's VM,
// 128 KiB steps took the CRC32C of a 4 MiB XOR sum from 370 to 200 µs and
// an RS step with both checksums' CRCs from 1.8 to 1.35 ms; 256 KiB steps
// lost the gain.
const sumBlock = 128 << 10
