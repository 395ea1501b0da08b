package schemes

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
)

func TestFileCRCsOutOfOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := []int64{0, 1, 1000, 4097, 77777}
	data := make([][]byte, len(sizes))
	for i, n := range sizes {
		data[i] = make([]byte, n)
		for j := range data[i] {
			data[i][j] = byte(rng.Uint32())
		}
	}
	type piece struct {
		file     int
		off, end int64
	}
	var ps []piece
	for i, n := range sizes {
		for off := int64(0); off < n; {
			end := min(n, off+1+rng.Int64N(3000))
			ps = append(ps, piece{i, off, end})
			off = end
		}
	}
	rng.Shuffle(len(ps), func(a, b int) { ps[a], ps[b] = ps[b], ps[a] })
	tr := newFileCRCs(regularFiles(sizes))
	for _, p := range ps {
		tr.add(p.file, p.off, data[p.file][p.off:p.end])
	}
	sums, err := tr.sums()
	if err != nil {
		t.Fatal(err)
	}
	for i := range sizes {
		if sums[i] != crc32c.Checksum(data[i]) {
			t.Errorf("file %d: %08x, want %08x", i, sums[i], crc32c.Checksum(data[i]))
		}
	}
	// A gap is reported, not papered over.
	tr = newFileCRCs(regularFiles([]int64{10}))
	tr.add(0, 0, make([]byte, 4))
	tr.add(0, 5, make([]byte, 5))
	if _, err := tr.sums(); err == nil {
		t.Error("gap not reported")
	}
}

// TestXorInto: the XOR with the fused CRC32C gives what XOR then CRC32C
// give, at sizes around its block, and goes on from the CRC it is given.
func TestXorInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, sumBlock - 1, sumBlock, sumBlock + 1, 3*sumBlock + 77} {
		a, b, dst := make([]byte, n), make([]byte, n), make([]byte, n)
		for i := range a {
			a[i], b[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		want := make([]byte, n)
		for i := range want {
			want[i] = a[i] ^ b[i]
		}
		crc := crc32c.Checksum([]byte("before"))
		xorInto(dst, a, b, true, &crc)
		if string(dst) != string(want) {
			t.Fatalf("%d bytes: XOR differs", n)
		}
		if w := crc32c.Checksum(append([]byte("before"), want...)); crc != w {
			t.Fatalf("%d bytes: crc32c %08x, want %08x", n, crc, w)
		}
	}
}

// regularFiles lists regular files of the given sizes.
func regularFiles(sizes []int64) []files.Meta {
	out := make([]files.Meta, len(sizes))
	for i, n := range sizes {
		out[i] = files.Meta{Path: fmt.Sprintf("f%d", i), Type: files.Regular, Size: n}
	}
	return out
}

// TestFileCRCsOfPartialFiles: a file the member holds only ranges of has
// the CRC32C of its copy, zeros between the ranges, from the ranges'
// bytes alone.
func TestFileCRCsOfPartialFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	copyOf := make([]byte, 10_000)
	ranges := []files.Range{{Off: 100, Len: 900}, {Off: 4000, Len: 1}, {Off: 9000, Len: 1000}}
	for _, r := range ranges {
		for i := r.Off; i < r.End(); i++ {
			copyOf[i] = byte(rng.UintN(255) + 1)
		}
	}
	for _, rs := range [][]files.Range{ranges, ranges[:2], nil} {
		want := make([]byte, len(copyOf))
		for _, r := range rs {
			copy(want[r.Off:r.End()], copyOf[r.Off:r.End()])
		}
		tr := newFileCRCs([]files.Meta{{Path: "f", Type: files.Regular, Size: int64(len(want)), Partial: true, Ranges: rs}})
		for _, r := range rs {
			tr.add(0, r.Off, want[r.Off:r.End()])
		}
		sums, err := tr.sums()
		if err != nil {
			t.Fatal(err)
		}
		if sums[0] != crc32c.Checksum(want) {
			t.Errorf("ranges %v: %08x, want %08x", rs, sums[0], crc32c.Checksum(want))
		}
	}
}
