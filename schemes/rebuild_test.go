package schemes

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
)

// rebuildCase is a scheme with the rounds of losses it must survive, one
// after the other, each rebuilt before the next.
type rebuildCase struct {
	params Params
	rounds [][]int
}

func rebuildCases(short bool) []rebuildCase {
	cases := []rebuildCase{
		{Params{Kind: Partner, Size: 2, Replicas: 1}, [][]int{{0}, {1}}},
		{Params{Kind: Partner, Size: 4, Replicas: 1}, [][]int{{1}, {3}, {0, 2}}},
		{Params{Kind: Partner, Size: 5, Replicas: 2}, [][]int{{1, 2}, {4, 0}, {3}}},
		{Params{Kind: XOR, Size: 2}, [][]int{{0}, {1}}},
		{Params{Kind: XOR, Size: 4}, [][]int{{2}, {0}, {3}}},
		{Params{Kind: RS, Size: 4, Parity: 2}, [][]int{{1, 2}, {0, 3}, {2}}},
		{Params{Kind: RS, Size: 3, Parity: 2}, [][]int{{0, 1}, {2}}},
		{Params{Kind: RS, Size: 5, Parity: 1}, [][]int{{4}, {0}}},
	}
	if !short {
		cases = append(cases,
			rebuildCase{Params{Kind: XOR, Size: 6}, [][]int{{5}, {1}}},
			rebuildCase{Params{Kind: RS, Size: 6, Parity: 3}, [][]int{{0, 2, 5}, {1}, {3, 4}}},
			rebuildCase{Params{Kind: RS, Size: 7, Parity: 2}, [][]int{{6, 0}, {3}}},
			rebuildCase{Params{Kind: Partner, Size: 6, Replicas: 3}, [][]int{{0, 1, 2}, {5}}},
			// Larger sets: many links per member, rows spread over solvers.
			rebuildCase{Params{Kind: RS, Size: 12, Parity: 4}, [][]int{{0, 5, 6, 11}, {3}}},
			rebuildCase{Params{Kind: XOR, Size: 12}, [][]int{{7}}},
		)
	}
	return cases
}

// readAll returns every member's redundancy file bytes.
func (ts *testSet) redBytes() [][]byte {
	out := make([][]byte, ts.p.Size)
	for r := range out {
		b, err := os.ReadFile(ts.redPath(r))
		if err != nil {
			ts.t.Fatal(err)
		}
		out[r] = b
	}
	return out
}

// lose wipes member r: the whole directory, or (partial) some of it.
func (ts *testSet) lose(r int, partial bool) {
	ts.t.Helper()
	if !partial {
		if err := os.RemoveAll(ts.dirs[r]); err != nil {
			ts.t.Fatal(err)
		}
		return
	}
	list, err := files.Scan(ts.dirs[r])
	if err != nil {
		ts.t.Fatal(err)
	}
	for i, f := range list {
		p := filepath.Join(ts.dirs[r], f.Path)
		switch {
		case f.Type == files.Regular && i%2 == 0:
			os.Remove(p)
		case f.Type == files.Regular:
			os.Truncate(p, f.Size/2)
		case f.Type == files.Symlink:
			os.Remove(p)
			os.WriteFile(p, []byte("not a link"), 0o644)
		}
	}
	os.RemoveAll(filepath.Join(ts.dirs[r], layout.MetaDir))
}

func TestRebuildRoundTrip(t *testing.T) {
	encPieces := []int{64, 1000}
	if testing.Short() {
		encPieces = []int{1000}
	}
	for _, c := range rebuildCases(testing.Short()) {
		for _, piece := range encPieces {
			for shapeName, sh := range shapes(c.params.Size, testing.Short()) {
				if testing.Short() && shapeName == "all-empty" {
					continue
				}
				name := fmt.Sprintf("%s/p=%d/r=%d/k=%d/piece=%d/%s", c.params.Kind, c.params.Size, c.params.Replicas, c.params.Parity, piece, shapeName)
				t.Run(name, func(t *testing.T) {
					params := c.params
					params.PieceSize = piece
					ts := newTestSet(t, params)
					ts.fillShape(sh, uint64(params.Size*7+params.Parity+params.Replicas))
					ts.mustEncode()
					want := make([]map[string]entry, params.Size)
					for r := range want {
						want[r] = snapshot(t, ts.dirs[r])
					}
					reds := ts.redBytes()
					for round, lost := range c.rounds {
						for i, x := range lost {
							ts.lose(x, (round+i)%2 == 1)
						}
						// Rebuild with a piece size other than the block size
						// to cover unaligned verified reads too.
						rebuildPiece := []int{4096, 100, 0}[round%3]
						_, errs := ts.rebuild(lost, WithPieceSize(rebuildPiece))
						for r, err := range errs {
							if err != nil {
								t.Fatalf("round %d (lost %v): rank %d: %v", round, lost, r, err)
							}
						}
						// Access times first: snapshots read files and so move them.
						for _, x := range lost {
							checkAtimes(t, ts, x)
						}
						for r := range want {
							compareSnapshots(t, fmt.Sprintf("round %d rank %d", round, r), want[r], snapshot(t, ts.dirs[r]))
							got, err := os.ReadFile(ts.redPath(r))
							if err != nil {
								t.Fatalf("round %d rank %d: %v", round, r, err)
							}
							if !bytes.Equal(got, reds[r]) {
								t.Errorf("round %d rank %d: redundancy file differs from the original (%d vs %d bytes)", round, r, len(got), len(reds[r]))
							}
						}
						for _, x := range lost {
							if _, err := os.Stat(filepath.Join(ts.dirs[x], layout.MetaDir, "rebuild.tmp")); !errors.Is(err, os.ErrNotExist) {
								t.Errorf("rank %d: staging directory left behind: %v", x, err)
							}
						}
					}
				})
			}
		}
	}
}

// checkAtimes compares a rebuilt member's access times with its header.
func checkAtimes(t *testing.T, ts *testSet, r int) {
	t.Helper()
	h := mustHeader(t, ts.redPath(r))
	for _, f := range h.Members[0].Files {
		if f.Type == files.HardLink {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(ts.dirs[r], f.Path), &st); err != nil {
			t.Fatal(err)
		}
		if st.Atim.Nano() != f.AtimeNs {
			t.Errorf("rank %d %s: atime %d, recorded %d", r, f.Path, st.Atim.Nano(), f.AtimeNs)
		}
	}
}

func TestRebuildTooManyLost(t *testing.T) {
	cases := []struct {
		params Params
		lost   []int
	}{
		{Params{Kind: Single, Size: 2}, []int{1}},
		{Params{Kind: XOR, Size: 4}, []int{0, 2}},
		{Params{Kind: RS, Size: 5, Parity: 2}, []int{0, 1, 3}},
		{Params{Kind: Partner, Size: 4, Replicas: 1}, []int{1, 2}},
		{Params{Kind: Partner, Size: 5, Replicas: 2}, []int{2, 3, 4}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%v", c.params.Kind, c.lost), func(t *testing.T) {
			ts := newTestSet(t, c.params)
			ts.fillShape(shapes(c.params.Size, true)["uneven"], 3)
			ts.mustEncode()
			before := make([]map[string]entry, c.params.Size)
			for r := range before {
				before[r] = snapshot(t, ts.dirs[r])
			}
			reds := ts.redBytes()
			for _, x := range c.lost {
				ts.lose(x, false)
			}
			_, errs := ts.rebuild(c.lost)
			for r, err := range errs {
				if !errors.Is(err, ErrTooManyLost) {
					t.Errorf("rank %d: %v, want ErrTooManyLost", r, err)
				}
			}
			for r := range before {
				lost := false
				for _, x := range c.lost {
					lost = lost || x == r
				}
				if lost {
					if _, err := os.Stat(ts.dirs[r]); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("rank %d: lost directory was touched: %v", r, err)
					}
					continue
				}
				compareSnapshots(t, fmt.Sprintf("survivor %d", r), before[r], snapshot(t, ts.dirs[r]))
				if got, err := os.ReadFile(ts.redPath(r)); err != nil || !bytes.Equal(got, reds[r]) {
					t.Errorf("survivor %d: redundancy file changed (%v)", r, err)
				}
			}
		})
	}
}

func TestRebuildNothingLost(t *testing.T) {
	ts := newTestSet(t, Params{Kind: XOR, Size: 3})
	ts.fillShape(shapes(3, true)["uneven"], 1)
	ts.mustEncode()
	res, errs := ts.rebuild(nil)
	for r, err := range errs {
		if err != nil || res[r].Sent != 0 {
			t.Errorf("rank %d: %v, %+v", r, err, res[r])
		}
	}
}

// TestRebuildOnSpareNode rebuilds a lost member on a spare node: the set
// lists a new node index for its rank, and survivors still hold headers
// naming the old one.
func TestRebuildOnSpareNode(t *testing.T) {
	for _, params := range []Params{{Kind: XOR, Size: 3}, {Kind: RS, Size: 4, Parity: 2}, {Kind: Partner, Size: 3, Replicas: 1}} {
		t.Run(params.Kind.String(), func(t *testing.T) {
			ts := encodedSet(t, params)
			const lost = 1
			want := snapshot(t, ts.dirs[lost])
			ts.lose(lost, false)
			ts.set.Nodes = append([]int(nil), ts.set.Nodes...)
			ts.set.Nodes[lost] = 99
			_, errs := ts.rebuild([]int{lost})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			compareSnapshots(t, "spare", want, snapshot(t, ts.dirs[lost]))
			if filepath.Base(ts.redPath(lost)) != fmt.Sprintf("99.%s.grp_2_of_3.mem_2_of_%d.redset", params.Kind, params.Size) {
				t.Errorf("rebuilt file named %s", ts.redPath(lost))
			}
			for r := 0; r < params.Size; r++ {
				if _, err := Inspect(ts.p, ts.member(r)); err != nil {
					t.Errorf("rank %d after the rebuild: %v", r, err)
				}
			}
		})
	}
}
