package schemes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestEncodeOverSpare checks that an encode written over a spare file —
// longer or shorter than the result, full of other bytes — leaves exactly
// the file a fresh encode writes, that the set rebuilds from such files, and
// that each spare is used once.
func TestEncodeOverSpare(t *testing.T) {
	for _, p := range []Params{
		{Kind: Partner, Size: 4, Replicas: 2},
		{Kind: XOR, Size: 4},
		{Kind: RS, Size: 5, Parity: 2},
	} {
		t.Run(p.Kind.String(), func(t *testing.T) {
			p.PieceSize = MinPieceSize
			ts := newTestSet(t, p)
			for r, d := range ts.dirs {
				fill(t, d, uint64(r+1), spec{files: 3, maxSize: 50_000, extras: r == 1})
			}
			// Headers record the times of the lists they are given, and
			// reading a file or directory moves its access time once
			// (relatime): encodes of the same lists are repeatable.
			want := make([]map[string]entry, p.Size)
			for r := range want {
				want[r] = snapshot(t, ts.dirs[r])
			}
			ms := ts.listAll()
			ts.mustEncodeAs(ms)
			reds := ts.redBytes()

			// Spares live beside the dataset directories (one file system,
			// as in the cache). Odd ranks get one longer than their file,
			// even ranks a shorter one, rank 0 none.
			spares := make([]string, p.Size)
			for r := 1; r < p.Size; r++ {
				n := len(reds[r]) + 4097
				if r%2 == 0 {
					n = len(reds[r]) / 2
				}
				spares[r] = filepath.Join(filepath.Dir(ts.dirs[r]), fmt.Sprintf("spare%d", r))
				if err := os.WriteFile(spares[r], bytes.Repeat([]byte{0xAB}, n), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			takes := make([]int, p.Size)
			res, errs := runAll(t, p.Size, func(ctx context.Context, r int, links Links) (*Result, error) {
				take := func() string {
					takes[r]++
					if takes[r] > 1 {
						return ""
					}
					return spares[r]
				}
				return Encode(ctx, p, ms[r], links, WithSpare(take))
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("encode over spare, rank %d: %v", r, err)
				}
			}
			for r := range reds {
				if takes[r] != 1 {
					t.Errorf("rank %d asked for a spare %d times, want once", r, takes[r])
				}
				got, err := os.ReadFile(res[r].File)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, reds[r]) {
					t.Errorf("rank %d: file written over a spare (%d bytes) differs from a fresh one (%d bytes)", r, len(got), len(reds[r]))
				}
				if r > 0 {
					if _, err := os.Stat(spares[r]); !os.IsNotExist(err) {
						t.Errorf("rank %d: spare still there after use: %v", r, err)
					}
				}
			}

			ts.lose(1, false)
			_, errs = ts.rebuild([]int{1})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rebuild from files written over spares, rank %d: %v", r, err)
				}
			}
			compareSnapshots(t, "rebuilt rank 1", want[1], snapshot(t, ts.dirs[1]))
		})
	}
}
