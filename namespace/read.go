package namespace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/sleep"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
)

// readReq asks a holder for one file of a member's share, sent over
// stream Stream.
type readReq struct {
	Dataset string `json:"dataset"`
	Member  string `json:"member"`
	Path    string `json:"path"`
	Stream  string `json:"stream"`
	// Offset and Length pick a range of the file: blocks of it, or a piece
	// of a file several members wrote (shared.go). Both 0 ask for the
	// whole file, which the holder may check as it sends it (the reader
	// counts its pieces only once the call succeeded).
	Offset int64 `json:"offset,omitempty"`
	Length int64 `json:"length,omitempty"`
	// Copy asks a PARTNER of the member for the whole file from the copy
	// its redundancy file keeps (the holder is down).
	Copy bool `json:"copy,omitempty"`
}

// Check implements jobnet.Checker.
func (m readReq) Check() error {
	if err := layout.CheckDatasetName(m.Dataset); err != nil {
		return err
	}
	if m.Member == "" || len(m.Member) > 64 || m.Stream == "" || len(m.Stream) > 128 {
		return errors.New("bad member or stream id")
	}
	if m.Offset < 0 || m.Length < 0 || (m.Length == 0 || m.Copy) && m.Offset != 0 || m.Copy && m.Length != 0 {
		return errors.New("bad range")
	}
	return files.CheckPath(m.Path)
}

// readReply is what the holder sent: the range's length.
type readReply struct {
	Size int64 `json:"size"`
}

// fetch copies bytes off..off+length of r's file (all of it if length is
// 0) from its holder into r's copy and returns the range it filled. While the holder is unreachable or
// does not hold the share (it may be restarting, or being rebuilt), a
// PARTNER dataset's file comes whole from a partner's copy; otherwise the
// fetch retries, at most MemberTimeout.
func (n *Namespace) fetch(ctx context.Context, r *Remote, off, length int64) (from, to int64, err error) {
	if r.e.Shared() {
		return n.fetchPieces(ctx, r, off, length)
	}
	deadline := time.Now().Add(n.o.MemberTimeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	e := r.e
	req := readReq{Dataset: r.dataset, Member: e.Member, Path: r.p, Offset: off, Length: length}
	from, to = off, off+length
	if length == 0 {
		to = e.Meta.Size
	}
	b := sleep.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	for {
		node := n.holder(e) // a stock-taking may move it meanwhile
		copies := n.copies(r.dataset, e)
		if len(copies) > 0 && !n.up(ctx, node) {
			err = fmt.Errorf("node %d unreachable", node)
		} else if err = n.fetchOnce(ctx, r, req, node); err == nil {
			return from, to, nil
		}
		retry := errors.Is(err, ErrNotHeld) || !jobnet.IsRemote(err)
		if retry {
			for _, c := range copies {
				cerr := n.fetchOnce(ctx, r, readReq{Dataset: r.dataset, Member: e.Member, Path: r.p, Copy: true}, c)
				if cerr == nil {
					n.log.Info("a file was read from a partner's copy: its holder is away", "dataset", r.dataset,
						"path", e.Path, "holder", node, "copy", c, "err", err)
					return 0, e.Meta.Size, nil
				}
				n.log.Warn("a partner's copy could not be read", "dataset", r.dataset, "path", e.Path, "copy", c, "err", cerr)
			}
		}
		if !retry {
			return 0, 0, err
		}
		if pause := b.Next(); time.Now().Add(pause).After(deadline) || sleep.For(ctx, pause) != nil {
			return 0, 0, fmt.Errorf("%s/%s is held by node %d, which did not serve it within %v (restart.member_timeout): %w",
				r.dataset, e.Path, node, n.o.MemberTimeout, err)
		}
	}
}

// linkWait is how long a read with a copy elsewhere waits for the link to
// the holder before it turns to the copy.
const linkWait = 500 * time.Millisecond

// up reports whether the link to node is up, or comes up within linkWait.
func (n *Namespace) up(ctx context.Context, node int) bool {
	ctx, cancel := context.WithTimeout(ctx, linkWait)
	defer cancel()
	return n.o.Mux.WaitUp(ctx, []int{node}) == nil
}

// copies returns the nodes that keep a copy of e's member's files: its
// partners, when the dataset is protected by PARTNER.
func (n *Namespace) copies(dataset string, e *record.Entry) []int {
	ds := n.o.Store.Get(dataset)
	if ds == nil {
		return nil
	}
	rec, err := n.recordOf(ds)
	if err != nil || rec.Scheme.Kind != schemes.Partner.String() {
		return nil
	}
	src := rec.Member(e.Member)
	if src == nil {
		return nil
	}
	set := rec.Set(src.Set)
	var out []int
	for _, r := range layout.PartnerHolders(len(set), src.Rank, rec.Scheme.Replicas) {
		out = append(out, n.holder(&record.Entry{Node: set[r].Node, Holder: set[r].HeldBy()}))
	}
	return out
}
