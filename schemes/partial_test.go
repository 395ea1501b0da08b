package schemes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/redfile"
)

// TestPartialFilesRoundTrip: a file every member wrote a part of (MPI-IO)
// costs each member only its ranges in its logical file; its CRC32C is
// its copy's, zeros between the ranges; a lost member's copy is rebuilt
// with its ranges at their offsets, at its size, and the rest zeros.
func TestPartialFilesRoundTrip(t *testing.T) {
	for _, p := range []Params{
		{Kind: Partner, Size: 3, Replicas: 1, PieceSize: 1000},
		{Kind: XOR, Size: 4, PieceSize: 1000},
		{Kind: RS, Size: 4, Parity: 2, PieceSize: 1000},
	} {
		t.Run(p.Kind.String(), func(t *testing.T) {
			ts := newTestSet(t, p)
			ms := make([]Member, p.Size)
			for r := range ms {
				// A header every rank writes, and rank r's part further on;
				// a whole file of its own too.
				ranges := []files.Range{{Off: 0, Len: 100}, {Off: int64(5000 + r*3000), Len: int64(2000 + r)}}
				size := ranges[1].End() + int64(r*10) // grown past the last write (ftruncate)
				writeSparse(t, filepath.Join(ts.dirs[r], "mpi.dat"), size, ranges, uint64(r))
				if err := os.WriteFile(filepath.Join(ts.dirs[r], fmt.Sprintf("own.%d", r)), []byte(fmt.Sprint("rank ", r)), 0o644); err != nil {
					t.Fatal(err)
				}
				ms[r] = ts.member(r)
				list, err := files.Scan(ts.dirs[r])
				if err != nil {
					t.Fatal(err)
				}
				for i := range list {
					if list[i].Path == "mpi.dat" {
						list[i].Partial, list[i].Ranges = true, ranges
					}
				}
				ms[r].Files = list
			}
			ts.mustEncodeAs(ms)
			for r := range ms {
				hdr, err := redfile.ReadHeader(ts.redPath(r))
				if err != nil {
					t.Fatal(err)
				}
				own := hdr.Members[0]
				if want := files.Bytes(ms[r].Files); own.Logical != want {
					t.Errorf("rank %d: logical size %d, want %d (the ranges and its own file)", r, own.Logical, want)
				}
				for _, f := range own.Files {
					if f.Path == "mpi.dat" {
						b, _ := os.ReadFile(filepath.Join(ts.dirs[r], "mpi.dat"))
						if !f.HasCRC || f.CRC32C != crc32c.Checksum(b) || !f.Partial {
							t.Errorf("rank %d: mpi.dat recorded %+v, want partial with the CRC32C %08x of its copy", r, f, crc32c.Checksum(b))
						}
					}
				}
			}
			want := snapshot(t, ts.dirs[1])
			ts.lose(1, false)
			if _, errs := ts.rebuild([]int{1}); slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
				t.Fatalf("rebuild: %v", errs)
			}
			compareSnapshots(t, "rank 1 rebuilt", want, snapshot(t, ts.dirs[1]))
		})
	}
}

// writeSparse makes a file of size bytes holding seeded bytes in ranges
// and nothing elsewhere.
func writeSparse(t *testing.T, path string, size int64, ranges []files.Range, seed uint64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, r := range ranges {
		b := make([]byte, r.Len)
		for i := range b {
			b[i] = byte(seed*31 + uint64(r.Off) + uint64(i)*7 + 1)
		}
		if _, err := f.WriteAt(b, r.Off); err != nil {
			t.Fatal(err)
		}
	}
}
