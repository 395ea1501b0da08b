package namespace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/sleep"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/record"
)

// A file several nodes wrote (record.Entry.Pieces) is read as one: each
// block a reader needs is put together in the read cache from its pieces,
// this node's own read from its copy, the others' asked of their holders
// (each only for the bytes of its piece, checked as every read of another
// node's file is), the bytes in no piece left zero. A block counts for
// readers once all of its pieces are there. Every node reads the same
// bytes, wherever it wrote: completion made sure the writers agree where
// their ranges overlap.

// sharedMember names the copies of files several members wrote in the
// read cache (a member identity is a hex digest: never this).
const sharedMember = "+shared"

// fetchPieces puts bytes off..off+length of r's file, one that several
// members wrote, together from its pieces, and returns the range it
// filled.
func (n *Namespace) fetchPieces(ctx context.Context, r *Remote, off, length int64) (from, to int64, err error) {
	want := files.Range{Off: off, Len: length}
	if length == 0 {
		want.Len = r.e.Meta.Size - off
	}
	for _, p := range r.e.Pieces {
		part := files.Overlap([]files.Range{p.Range}, []files.Range{want})
		if len(part) == 0 {
			continue
		}
		err = n.fetchPiece(ctx, r, p, part[0])
		if err != nil {
			return 0, 0, err
		}
	}
	return want.Off, want.End(), nil
}

// copyOwn copies the bytes in of a file of source s, which this node
// holds, into r's copy.
func (n *Namespace) copyOwn(r *Remote, s record.Source, in files.Range) error {
	ds := n.o.Store.Get(r.dataset)
	if ds == nil {
		return fmt.Errorf("%s left this node's cache: %w", r.dataset, os.ErrNotExist)
	}
	src, err := os.Open(filepath.Join(ds.ShareDir(s.Member), filepath.FromSlash(r.p)))
	if err != nil {
		return err
	}
	defer src.Close()
	if _, err := io.Copy(io.NewOffsetWriter(r.f, in.Off), io.NewSectionReader(src, in.Off, in.Len)); err != nil {
		return fmt.Errorf("%s/%s: this node's %v: %w", r.dataset, r.p, in, err)
	}
	return nil
}

// fetchPiece asks the holder of piece p for the bytes in of it, into r's
// copy: its source's, or while that one is unreachable or does not hold
// the share (it may be restarting, or being rebuilt) one of its
// alternatives' (members that wrote the same bytes); it retries at most
// MemberTimeout. One of them on this node serves it at once.
func (n *Namespace) fetchPiece(ctx context.Context, r *Remote, p record.Piece, in files.Range) error {
	sources := append([]record.Source{p.Source}, p.Alts...)
	for _, s := range sources {
		if s.Local {
			return n.copyOwn(r, s, in)
		}
	}
	deadline := time.Now().Add(n.o.MemberTimeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	b := sleep.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	for {
		var err error
		for _, s := range sources {
			node := n.holder(&record.Entry{Node: s.Node, Holder: s.Holder}) // a stock-taking may move it meanwhile
			if len(sources) > 1 && !n.up(ctx, node) {
				// A call to a node that is down waits for its link:
				// another source may answer meanwhile.
				err = fmt.Errorf("node %d unreachable", node)
				continue
			}
			req := readReq{Dataset: r.dataset, Member: s.Member, Path: r.p, Offset: in.Off, Length: in.Len}
			if err = n.fetchOnce(ctx, r, req, node); err == nil {
				return nil
			}
			if !errors.Is(err, ErrNotHeld) && jobnet.IsRemote(err) {
				return err
			}
		}
		if pause := b.Next(); time.Now().Add(pause).After(deadline) || sleep.For(ctx, pause) != nil {
			return fmt.Errorf("%s/%s: %v is held by node %d (and %d others that wrote it alike), none of which served it within %v (restart.member_timeout): %w",
				r.dataset, r.p, in, n.holder(&record.Entry{Node: p.Node, Holder: p.Holder}), len(p.Alts), n.o.MemberTimeout, err)
		}
	}
}

// Assemble puts file p of dataset, one that several members wrote,
// together in dst, whose size it sets: this node's pieces copied from its
// copy, the others' asked of their holders. It is what a flush writes to
// the prefix as one file.
func (n *Namespace) Assemble(ctx context.Context, dataset, p string, dst *os.File) error {
	v := n.View(dataset)
	if v == nil {
		return fmt.Errorf("assemble %s/%s: no recorded copy of the dataset here", dataset, p)
	}
	e, ok := v.Lookup(p)
	if !ok || !e.Shared() {
		return fmt.Errorf("assemble %s/%s: not a file several members wrote", dataset, p)
	}
	if err := dst.Truncate(e.Meta.Size); err != nil {
		return fmt.Errorf("assemble %s/%s: %w", dataset, p, err)
	}
	// A copy that no reader shares and no block tracks: the pieces land
	// in dst.
	r := &Remote{n: n, dataset: dataset, e: e, p: p, f: dst}
	if _, _, err := n.fetchPieces(ctx, r, 0, 0); err != nil {
		return fmt.Errorf("assemble %s/%s: %w", dataset, p, err)
	}
	return nil
}
