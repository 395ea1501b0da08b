package schemes

import (
	"bytes"
	"context"
	"testing"
)

// TestZeroCopyMatchesCopy encodes and rebuilds every scheme on the
// zero-copy path (links with the optional Conn extensions, so PARTNER
// copies and RS's finished checksums take the splice protocol) and with it forced off, and checks that
// both write byte-identical redundancy files and rebuild the same files.
// Files are small next to the piece size's multiples, so pieces both lie
// inside one file (their CRC comes with the read) and span files.
func TestZeroCopyMatchesCopy(t *testing.T) {
	for _, p := range []Params{
		{Kind: Partner, Size: 4, Replicas: 2},
		{Kind: XOR, Size: 4},
		{Kind: RS, Size: 5, Parity: 2},
	} {
		t.Run(p.Kind.String(), func(t *testing.T) {
			p.PieceSize = 4096
			ts := newTestSet(t, p)
			for r, d := range ts.dirs {
				fill(t, d, uint64(r+7), spec{files: 4, maxSize: 40_000, extras: r == 1})
			}
			want := snapshot(t, ts.dirs[1])
			// The same lists throughout (see TestEncodeOverSpare).
			ms := ts.listAll()
			res := ts.mustEncodeAs(ms, WithZeroCopy(false))
			for r, rs := range res {
				if rs.Path != PathCopy {
					t.Fatalf("rank %d: copy path forced, Result.Path %q", r, rs.Path)
				}
			}
			copied := ts.redBytes()

			run := func(on bool, fn func(ctx context.Context, r int, links Links) (*Result, error)) []*Result {
				t.Helper()
				net := newMemNet()
				net.fileConns = true
				res, errs := runAllOn(t, net, p.Size, fn)
				for r, err := range errs {
					if err != nil {
						t.Fatalf("zero copy %v, rank %d: %v", on, r, err)
					}
				}
				return res
			}
			res = run(true, func(ctx context.Context, r int, links Links) (*Result, error) {
				return Encode(ctx, p, ms[r], links, WithZeroCopy(true))
			})
			for r, rs := range res {
				if rs.Path != PathZeroCopy {
					t.Errorf("rank %d: Result.Path %q, want %q", r, rs.Path, PathZeroCopy)
				}
			}
			for r, b := range ts.redBytes() {
				if !bytes.Equal(b, copied[r]) {
					t.Errorf("rank %d: zero-copy redundancy file (%d bytes) differs from the copy path's (%d bytes)", r, len(b), len(copied[r]))
				}
			}
			for _, on := range []bool{true, false} {
				ts.lose(1, false)
				run(on, func(ctx context.Context, r int, links Links) (*Result, error) {
					return Rebuild(ctx, p, ts.member(r), []int{1}, links, WithZeroCopy(on))
				})
				compareSnapshots(t, "rebuilt rank 1", want, snapshot(t, ts.dirs[1]))
				if b := ts.redBytes()[1]; !bytes.Equal(b, copied[1]) {
					t.Errorf("zero copy %v: rebuilt redundancy file of rank 1 differs from the encoded one", on)
				}
			}
		})
	}
}

// TestZeroCopyMixedSet: members disagree on the path (one node turned it
// off); the set still encodes the same bytes, since a receiver on either
// path takes either kind of data message (PARTNER copies, XOR's parity,
// RS's finished checksums).
func TestZeroCopyMixedSet(t *testing.T) {
	for _, p := range []Params{
		{Kind: Partner, Size: 4, Replicas: 2, PieceSize: 4096},
		{Kind: XOR, Size: 4, PieceSize: 4096},
		{Kind: RS, Size: 5, Parity: 2, PieceSize: 4096},
	} {
		t.Run(p.Kind.String(), func(t *testing.T) {
			ts := newTestSet(t, p)
			for r, d := range ts.dirs {
				fill(t, d, uint64(r+3), spec{files: 3, maxSize: 30_000})
			}
			ms := ts.listAll()
			ts.mustEncodeAs(ms, WithZeroCopy(false))
			copied := ts.redBytes()
			net := newMemNet()
			net.fileConns = true
			_, errs := runAllOn(t, net, p.Size, func(ctx context.Context, r int, links Links) (*Result, error) {
				return Encode(ctx, p, ms[r], links, WithZeroCopy(r%2 == 0))
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r, b := range ts.redBytes() {
				if !bytes.Equal(b, copied[r]) {
					t.Errorf("rank %d: mixed-path redundancy file differs from the copy path's", r)
				}
			}
		})
	}
}

// TestActivePath: the option decides, and overrides the environment.
func TestActivePath(t *testing.T) {
	if got := ActivePath(WithZeroCopy(false)); got != PathCopy {
		t.Errorf("ActivePath(off) = %q", got)
	}
	if got := ActivePath(WithZeroCopy(true)); got != PathZeroCopy {
		t.Errorf("ActivePath(on) = %q", got)
	}
}

// TestZeroCopyMixedRebuild: a rebuild where the lost member and the
// members that send it what it stores disagree on the path restores the
// same files and the same redundancy file either way round (a sender on
// the copy path sends plain pieces, which a zero-copy lost member receives
// whole).
func TestZeroCopyMixedRebuild(t *testing.T) {
	for _, p := range []Params{
		{Kind: Partner, Size: 4, Replicas: 2, PieceSize: 4096},
		{Kind: XOR, Size: 4, PieceSize: 4096},
	} {
		t.Run(p.Kind.String(), func(t *testing.T) {
			ts := newTestSet(t, p)
			for r, d := range ts.dirs {
				fill(t, d, uint64(r+5), spec{files: 3, maxSize: 30_000, extras: r == 2})
			}
			ts.mustEncode(WithZeroCopy(false))
			ts.mustEncode(WithZeroCopy(false))
			want, encoded := snapshot(t, ts.dirs[2]), ts.redBytes()[2]
			for _, lostOn := range []bool{true, false} {
				ts.lose(2, false)
				net := newMemNet()
				net.fileConns = true
				_, errs := runAllOn(t, net, p.Size, func(ctx context.Context, r int, links Links) (*Result, error) {
					return Rebuild(ctx, p, ts.member(r), []int{2}, links, WithZeroCopy((r == 2) == lostOn))
				})
				for r, err := range errs {
					if err != nil {
						t.Fatalf("lost member zero copy %v, rank %d: %v", lostOn, r, err)
					}
				}
				compareSnapshots(t, "rebuilt rank 2", want, snapshot(t, ts.dirs[2]))
				if !bytes.Equal(ts.redBytes()[2], encoded) {
					t.Errorf("lost member zero copy %v: rebuilt redundancy file differs from the encoded one", lostOn)
				}
			}
		})
	}
}
