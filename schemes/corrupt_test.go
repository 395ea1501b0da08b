package schemes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/scrfs/scrfs/internal/testutil"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/redfile"
)

// regions are where the parts of a redundancy file lie, as
// docs/formats-redundancy.md places them.
type regions struct {
	headerOff, headerLen, dataLen, size int64
}

// fileRegions reads a good redundancy file's preamble (header length at
// byte 12, data length at 16) to find its parts.
func fileRegions(t testing.TB, path string) regions {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := redfile.ReadHeader(path); err != nil {
		t.Fatal(err)
	}
	data := int64(binary.LittleEndian.Uint64(b[16:]))
	return regions{headerOff: redfile.PreambleSize + data, headerLen: int64(binary.LittleEndian.Uint32(b[12:])),
		dataLen: data, size: int64(len(b))}
}

// encodedXOR returns an encoded 4-member XOR set.
func encodedSet(t *testing.T, p Params) *testSet {
	ts := newTestSet(t, p)
	ts.fillShape(shapes(p.Size, true)["uneven"], 11)
	ts.mustEncode()
	return ts
}

func TestCorruptionDetected(t *testing.T) {
	type damage struct {
		name string
		at   func(l regions) int64 // byte to flip; -1 = truncate instead
	}
	damages := []damage{
		{"preamble", func(regions) int64 { return 17 }},
		{"header", func(l regions) int64 { return l.headerOff + l.headerLen/2 }},
		{"parity", func(l regions) int64 { return redfile.PreambleSize + l.dataLen/2 }},
		{"trailer", func(l regions) int64 { return l.size - 12 }},
		{"truncated", func(regions) int64 { return -1 }},
	}
	for _, params := range []Params{{Kind: XOR, Size: 4, PieceSize: 512}, {Kind: RS, Size: 4, Parity: 2, PieceSize: 512}} {
		for _, d := range damages {
			t.Run(params.Kind.String()+"/"+d.name, func(t *testing.T) {
				t.Parallel()
				ts := encodedSet(t, params)
				const victim, lostRank = 1, 2
				path := ts.redPath(victim)
				l := fileRegions(t, path)
				if off := d.at(l); off >= 0 {
					testutil.FlipByte(t, path, off)
				} else if err := os.Truncate(path, l.size-5); err != nil {
					t.Fatal(err)
				}
				_, hdrErr := redfile.ReadHeader(path)
				if d.name == "parity" {
					if hdrErr != nil {
						t.Errorf("ReadHeader reads no data, yet: %v", hdrErr)
					}
				} else if !errors.Is(hdrErr, ErrCorrupt) {
					t.Errorf("ReadHeader: %v, want ErrCorrupt", hdrErr)
				}
				if _, err := Inspect(ts.p, ts.member(victim)); !errors.Is(err, ErrCorrupt) {
					t.Errorf("Inspect: %v, want ErrCorrupt", err)
				}
				if _, err := Inspect(ts.p, ts.member(0)); err != nil {
					t.Errorf("Inspect of an intact member: %v", err)
				}

				// RS with two lost contributors in some rows reads both of
				// the victim's checksum segments; XOR reads all parity.
				lost := []int{lostRank}
				if params.Kind == RS {
					lost = []int{lostRank, lostRank + 1}
				}
				for _, x := range lost {
					ts.lose(x, false)
				}
				_, errs := ts.rebuild(lost)
				// The victim and the members it feeds learn why; members
				// that only saw its link go away report a PeerError.
				for r, err := range errs {
					var pe *PeerError
					if !errors.Is(err, ErrCorrupt) && !errors.As(err, &pe) {
						t.Errorf("rank %d: %v, want ErrCorrupt or a PeerError", r, err)
					}
				}
				for _, r := range append([]int{victim}, lost...) {
					if !errors.Is(errs[r], ErrCorrupt) {
						t.Errorf("rank %d: %v, want ErrCorrupt", r, errs[r])
					}
				}
				if d.name == "parity" && errs[victim] != nil && !strings.Contains(errs[victim].Error(), path) {
					t.Errorf("victim's error does not name the file: %v", errs[victim])
				}
				if got := restoredFiles(t, ts.dirs[lostRank]); len(got) > 0 {
					t.Errorf("lost member has files after a failed rebuild: %v", got)
				}
			})
		}
	}
}

// restoredFiles lists entries of dir outside .scrfs.
func restoredFiles(t testing.TB, dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == layout.MetaDir {
			return filepath.SkipDir
		}
		if rel != "." {
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestSurvivorFileCorrupt damages a survivor's application file without
// changing its size: only the recorded file CRCs can tell, and they must.
func TestSurvivorFileCorrupt(t *testing.T) {
	for _, params := range []Params{{Kind: XOR, Size: 3}, {Kind: RS, Size: 4, Parity: 1}, {Kind: Partner, Size: 3, Replicas: 1}} {
		t.Run(params.Kind.String(), func(t *testing.T) {
			ts := encodedSet(t, params)
			h := mustHeader(t, ts.redPath(0))
			// Damage every file of rank 0 somewhere, so some damage lands in
			// the lost member's data rows and some in its parity row.
			for i, f := range h.Members[0].Files {
				if f.Type == files.Regular && f.Size > 0 {
					testutil.FlipByte(t, filepath.Join(ts.dirs[0], f.Path), int64(i*7919)%f.Size)
				}
			}
			if _, err := Inspect(ts.p, ts.member(0)); err != nil {
				t.Fatalf("Inspect checks sizes, not contents: %v", err)
			}
			ts.lose(1, false)
			_, errs := ts.rebuild([]int{1})
			if !errors.Is(errs[1], ErrCorrupt) {
				t.Errorf("lost member: %v, want ErrCorrupt", errs[1])
			}
			if got := restoredFiles(t, ts.dirs[1]); len(got) > 0 {
				t.Errorf("lost member has files after a failed rebuild: %v", got)
			}
		})
	}
}

func TestInspect(t *testing.T) {
	ts := encodedSet(t, Params{Kind: RS, Size: 3, Parity: 1})
	inv, err := Inspect(ts.p, ts.member(1))
	if err != nil {
		t.Fatal(err)
	}
	if inv.Header == nil || inv.Files == 0 || inv.DataBytes != int64(len(logicalBytes(t, ts.dirs[1]))) {
		t.Errorf("inventory %+v", inv)
	}
	// A missing application file, a changed size.
	list, _ := files.Scan(ts.dirs[1])
	var removed string
	for _, f := range list {
		if f.Type == files.Regular {
			removed = f.Path
			os.Remove(filepath.Join(ts.dirs[1], f.Path))
			break
		}
	}
	inv, err = Inspect(ts.p, ts.member(1))
	if !errors.Is(err, ErrMismatch) || len(inv.Problems) == 0 || !strings.Contains(inv.Problems[0], removed) {
		t.Errorf("missing file: %v, %+v", err, inv)
	}
	// No redundancy file at all.
	os.Remove(ts.redPath(2))
	if _, err := Inspect(ts.p, ts.member(2)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no file: %v, want fs.ErrNotExist", err)
	}
	// A header from another member's set.
	other := ts.member(0)
	other.Set.Nodes = append([]int{99}, other.Set.Nodes[1:]...)
	if _, err := Inspect(ts.p, other); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("renamed node: %v", err)
	}
	other = ts.member(0)
	other.Dataset = "ckpt.8"
	if _, err := Inspect(ts.p, other); !errors.Is(err, ErrMismatch) {
		t.Errorf("other dataset: %v, want ErrMismatch", err)
	}
}

func TestEncodeMismatchAndFailure(t *testing.T) {
	t.Run("piece size", func(t *testing.T) {
		ts := newTestSet(t, Params{Kind: XOR, Size: 3})
		ts.fillShape(shapes(3, true)["uneven"], 2)
		ms := ts.listAll()
		_, errs := runAll(t, 3, func(ctx context.Context, r int, links Links) (*Result, error) {
			var opts []Option
			if r == 2 {
				opts = append(opts, WithPieceSize(4096))
			}
			return Encode(ctx, ts.p, ms[r], links, opts...)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrMismatch) {
				t.Errorf("rank %d: %v, want ErrMismatch", r, err)
			}
		}
	})
	t.Run("file changed since listed", func(t *testing.T) {
		// Encode reads the list it is given, not the directory: a file
		// whose size is no longer the listed one fails it.
		ts := newTestSet(t, Params{Kind: RS, Size: 4, Parity: 2})
		ts.fillShape(shapes(4, true)["uneven"], 2)
		members := ts.listAll()
		changed := ""
		for _, f := range members[3].Files {
			if f.Type == files.Regular && f.Size > 0 {
				changed = f.Path
				break
			}
		}
		if err := os.Truncate(filepath.Join(ts.dirs[3], changed), 1); err != nil {
			t.Fatal(err)
		}
		_, errs := runAll(t, 4, func(ctx context.Context, r int, links Links) (*Result, error) {
			return Encode(ctx, ts.p, members[r], links)
		})
		for r, err := range errs {
			if err == nil {
				t.Errorf("rank %d succeeded", r)
			}
			var pe *PeerError
			if r == 3 && (!errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), changed)) {
				t.Errorf("rank 3: %v, want ErrMismatch naming %s", err, changed)
			}
			if r != 3 && !(errors.As(err, &pe) && errors.Is(err, ErrAborted)) {
				t.Errorf("rank %d: %v, want a PeerError wrapping ErrAborted", r, err)
			}
		}
		for r := range ts.dirs {
			if _, err := os.Stat(ts.redPath(r)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("rank %d wrote a redundancy file: %v", r, err)
			}
			if _, err := os.Stat(ts.redPath(r) + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("rank %d left a temporary file: %v", r, err)
			}
		}
	})
}

// failingLinks wraps a member's links so its stream to one peer breaks
// after a number of sends, as a dropped TCP connection would.
type failingLinks struct {
	Links
	to    int
	after int
}

type failingConn struct {
	Conn
	left *int
}

var errInjected = errors.New("injected link failure")

func (l failingLinks) Conn(ctx context.Context, rank int) (Conn, error) {
	c, err := l.Links.Conn(ctx, rank)
	if err != nil || rank != l.to {
		return c, err
	}
	n := l.after
	return &failingConn{Conn: c, left: &n}, nil
}

func (c *failingConn) Send(ctx context.Context, msg []byte) error {
	if *c.left <= 0 {
		return errInjected
	}
	*c.left--
	return c.Conn.Send(ctx, msg)
}

// TestLinkFailure breaks one link at various points of encodes and
// rebuilds: every member must return an error (none hangs), and the member
// whose link broke must say so.
func TestLinkFailure(t *testing.T) {
	for _, params := range []Params{
		{Kind: Partner, Size: 4, Replicas: 2, PieceSize: 256},
		{Kind: XOR, Size: 4, PieceSize: 256},
		{Kind: RS, Size: 4, Parity: 2, PieceSize: 256},
	} {
		afters := []int{0, 1, 5, 40}
		if testing.Short() {
			afters = []int{1, 5}
		}
		for _, after := range afters {
			t.Run(fmt.Sprintf("%s/after=%d", params.Kind, after), func(t *testing.T) {
				t.Parallel() // mostly waiting for aborts to time out
				ts := newTestSet(t, params)
				ts.fillShape(shapes(params.Size, true)["uneven"], 4)
				// The broken link is one the scheme uses for data: to the
				// right neighbour (xor, partner) or a checksum holder (rs).
				const from, to = 1, 2
				wrap := func(r int, links Links) Links {
					if r == from {
						return failingLinks{Links: links, to: to, after: after}
					}
					return links
				}
				ms := ts.listAll()
				_, errs := runAll(t, params.Size, func(ctx context.Context, r int, links Links) (*Result, error) {
					return Encode(ctx, ts.p, ms[r], wrap(r, links))
				})
				failed := 0
				for _, err := range errs {
					if err != nil {
						failed++
					}
				}
				if failed == 0 {
					t.Skip("the link carried fewer messages than the failure point")
				}
				if !errors.Is(errs[from], errInjected) {
					t.Errorf("rank %d: %v, want the injected failure", from, errs[from])
				}
				for r, err := range errs {
					if err == nil {
						t.Errorf("rank %d succeeded although rank %d failed", r, from)
					}
				}

				// Same for a rebuild of rank 3 after a clean encode.
				ts.mustEncode()
				want := snapshot(t, ts.dirs[3])
				ts.lose(3, false)
				_, errs = runAll(t, params.Size, func(ctx context.Context, r int, links Links) (*Result, error) {
					return Rebuild(ctx, ts.p, ts.member(r), []int{3}, wrap(r, links))
				})
				for r, err := range errs {
					if err == nil && errs[from] != nil {
						t.Errorf("rebuild: rank %d succeeded although rank %d failed: %v", r, from, errs[from])
					}
				}
				// A failure after the lost member committed (in the final
				// round) leaves its verified files in place; anything else
				// must leave nothing. Never partial or wrong files.
				if got := restoredFiles(t, ts.dirs[3]); len(got) > 0 {
					compareSnapshots(t, "after a failed rebuild", want, snapshot(t, ts.dirs[3]))
				}
			})
		}
	}
}

// TestSingleChecksItsList: SINGLE reads no data, yet does not record a file
// that is no longer as listed.
func TestSingleChecksItsList(t *testing.T) {
	ts := newTestSet(t, Params{Kind: Single, Size: 1})
	fill(t, ts.dirs[0], 3, spec{files: 3, maxSize: 1000})
	ms := ts.listAll()
	if _, errs := ts.encodeAs(ms); errs[0] != nil {
		t.Fatal(errs[0])
	}
	for _, f := range ms[0].Files {
		if f.Type == files.Regular {
			if err := os.Truncate(filepath.Join(ts.dirs[0], f.Path), f.Size+1); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if _, errs := ts.encodeAs(ms); !errors.Is(errs[0], ErrMismatch) {
		t.Fatalf("SINGLE over a changed file: %v, want ErrMismatch", errs[0])
	}
}
