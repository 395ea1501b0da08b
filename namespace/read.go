package namespace

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
)

// pieceSize is how much of a file one stream message carries: large
// enough that per-message costs vanish, small enough to bound memory.
const pieceSize = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var pieces = sync.Pool{New: func() any { b := make([]byte, pieceSize); return &b }}

// readReq asks a holder for one file of a member's share, sent over
// stream Stream.
type readReq struct {
	Dataset string `json:"dataset"`
	Member  string `json:"member"`
	Path    string `json:"path"`
	Stream  string `json:"stream"`
	// Copy asks a PARTNER of the member for the file from the copy its
	// redundancy file keeps (the holder is down).
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
	return schemes.CheckRelPath(m.Path)
}

// readReply is what the holder sent.
type readReply struct {
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc32c"`
}

// flight is one transfer under way; readers of the same file wait for it.
type flight struct {
	done chan struct{}
	err  error
}

// Materialize returns the path of a complete, verified copy of entry e of
// dataset, on this node: the file itself when this node holds it, else a
// copy in the read cache, fetched now (once for every concurrent reader).
func (n *Namespace) Materialize(ctx context.Context, dataset string, e *record.Entry) (string, error) {
	p := e.Path
	if e.Meta.Type == schemes.HardLink {
		p = e.Meta.Target // the bytes are the earlier path's
	}
	if e.Local {
		ds := n.o.Store.Get(dataset)
		if ds == nil {
			return "", fmt.Errorf("%s left this node's cache: %w", dataset, os.ErrNotExist)
		}
		return filepath.Join(ds.ShareDir(e.Member), filepath.FromSlash(p)), nil
	}
	dst := n.rc.path(dataset, e.Member, p)
	if n.rc.get(dst) {
		n.metrics.reads.WithLabelValues("cached").Inc()
		return dst, nil
	}
	n.mu.Lock()
	f := n.flights[dst]
	owner := f == nil
	if owner {
		f = &flight{done: make(chan struct{})}
		n.flights[dst] = f
	}
	n.mu.Unlock()
	if owner {
		f.err = n.fetch(ctx, dataset, e, p, dst)
		n.mu.Lock()
		delete(n.flights, dst)
		n.mu.Unlock()
		close(f.done)
		result := "fetched"
		if f.err != nil {
			result = "failed"
			n.log.Error("could not read a file another node holds", "dataset", dataset, "path", e.Path,
				"node", n.holder(e), "err", f.err)
		}
		n.metrics.reads.WithLabelValues(result).Inc()
		return dst, f.err
	}
	n.metrics.reads.WithLabelValues("shared").Inc()
	select {
	case <-f.done:
		return dst, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// fetch copies file p of e's member from its holder into dst. While the
// holder is unreachable or does not hold the share (it may be restarting,
// or being rebuilt), a PARTNER dataset's file comes from a partner's copy;
// otherwise the fetch retries, at most MemberTimeout.
func (n *Namespace) fetch(ctx context.Context, dataset string, e *record.Entry, p, dst string) error {
	deadline := time.Now().Add(n.o.MemberTimeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		node := n.holder(e) // a stock-taking may move it meanwhile
		copies := n.copies(dataset, e)
		var err error
		if len(copies) > 0 && !n.up(ctx, node) {
			err = fmt.Errorf("node %d unreachable", node)
		} else {
			err = n.fetchOnce(ctx, dataset, e, readReq{Dataset: dataset, Member: e.Member, Path: p}, node, dst)
		}
		retry := errors.Is(err, ErrNotHeld) || (err != nil && !jobnet.IsRemote(err))
		if retry {
			for _, c := range copies {
				cerr := n.fetchOnce(ctx, dataset, e, readReq{Dataset: dataset, Member: e.Member, Path: p, Copy: true}, c, dst)
				if cerr == nil {
					n.log.Info("a file was read from a partner's copy: its holder is away", "dataset", dataset,
						"path", e.Path, "holder", node, "copy", c, "err", err)
					return nil
				}
				n.log.Warn("a partner's copy could not be read", "dataset", dataset, "path", e.Path, "copy", c, "err", cerr)
			}
		}
		if err == nil || !retry || time.Now().Add(backoff).After(deadline) {
			if retry {
				return fmt.Errorf("%s/%s is held by node %d, which did not serve it within %v (restart.member_timeout): %w",
					dataset, e.Path, node, n.o.MemberTimeout, err)
			}
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s/%s is held by node %d, which did not serve it within %v (restart.member_timeout): %w",
				dataset, e.Path, node, n.o.MemberTimeout, err)
		}
		backoff = min(2*backoff, time.Second)
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
	rec, err := record.Load(ds.Dir())
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

// fetchOnce asks node for the file req names and receives it into dst.
func (n *Namespace) fetchOnce(ctx context.Context, dataset string, e *record.Entry, req readReq, node int, dst string) error {
	p := req.Path
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".part-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req.Stream = "ns/" + jobnet.NewToken()
	sid := req.Stream
	type got struct {
		size int64
		crc  uint32
		err  error
	}
	recv := make(chan got, 1)
	go func() {
		size, crc, err := n.receive(ctx, node, sid, tmp)
		recv <- got{size, crc, err}
	}()
	var rep readReply
	err = n.o.Mux.Call(ctx, node, "ns-read", req, &rep)
	if err != nil {
		cancel()
		<-recv
		return err
	}
	r := <-recv
	switch {
	case r.err != nil:
		return r.err
	case r.size != rep.Size || r.crc != rep.CRC:
		return fmt.Errorf("%s/%s from node %d: received %d bytes with CRC32C %08x, sent %d with %08x",
			dataset, p, node, r.size, r.crc, rep.Size, rep.CRC)
	case rep.Size != e.Meta.Size:
		return fmt.Errorf("%s/%s from node %d: %d bytes, the record says %d", dataset, p, node, rep.Size, e.Meta.Size)
	}
	if err := tmp.Chmod(0o400); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	n.metrics.received.Add(float64(r.size))
	n.rc.add(dst, r.size)
	return nil
}

// receive writes what stream sid from node carries into w until the holder
// closes it, and returns its length and CRC32C.
func (n *Namespace) receive(ctx context.Context, node int, sid string, w io.Writer) (int64, uint32, error) {
	s, err := n.o.Mux.AcceptStream(ctx, node, sid)
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	bp := pieces.Get().(*[]byte)
	defer pieces.Put(bp)
	var size int64
	var crc uint32
	for {
		b, err := s.Recv(ctx, *bp)
		if err != nil {
			// The holder closes after the last piece: its answer to the
			// call says how much that was.
			return size, crc, nil
		}
		if len(b) == 0 {
			return size, crc, nil
		}
		if _, err := w.Write(b); err != nil {
			return size, crc, err
		}
		crc = crc32.Update(crc, castagnoli, b)
		size += int64(len(b))
	}
}

// handleRead serves one file of a share this node holds, checking it
// against the CRC32C recorded when the dataset was protected; or, asked for
// a copy, the file of a PARTNER source from the copy this node keeps.
func (n *Namespace) handleRead(ctx context.Context, from int, m readReq) (any, error) {
	ds := n.o.Store.Get(m.Dataset)
	if ds == nil || ds.Info().Seq == 0 {
		return nil, fmt.Errorf("node %d holds no recorded copy of %s: %w", n.self, m.Dataset, ErrNotHeld)
	}
	rec, err := record.Load(ds.Dir())
	if err != nil {
		return nil, err
	}
	mem := rec.Member(m.Member)
	if mem == nil || (!m.Copy && mem.HeldBy() != n.o.Store.NodeID()) {
		return nil, fmt.Errorf("node %d does not hold member %.12s's share of %s: %w", n.self, m.Member, m.Dataset, ErrNotHeld)
	}
	s, err := n.o.Mux.OpenStream(ctx, from, m.Stream)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	bp := pieces.Get().(*[]byte)
	defer pieces.Put(bp)
	w := &streamWriter{ctx: ctx, s: s}
	if m.Copy {
		err = n.sendCopy(ds, rec, mem, m.Path, w, *bp)
	} else {
		err = n.sendOwn(ds.ShareDir(mem.ID), mem, m, w, *bp)
	}
	if err != nil {
		return nil, err
	}
	return w.rep, nil
}

// sendOwn sends file m.Path of member mem's share, kept in dir.
func (n *Namespace) sendOwn(dir string, mem *record.Member, m readReq, w *streamWriter, buf []byte) error {
	want, known, err := recordedCRC(dir, mem, m.Path)
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(path.Clean(m.Path))))
	if err != nil {
		return fmt.Errorf("node %d: %w", n.self, err)
	}
	defer f.Close()
	for {
		k, rerr := io.ReadFull(f, buf)
		if k > 0 {
			if _, err := w.Write(buf[:k]); err != nil {
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if known && w.rep.CRC != want {
		return fmt.Errorf("%s/%s on node %d no longer matches the CRC32C recorded when it was protected: %w",
			m.Dataset, m.Path, n.self, schemes.ErrCorrupt)
	}
	return nil
}

// sendCopy sends file p of PARTNER member src from the copy kept by a
// member whose share this node holds.
func (n *Namespace) sendCopy(ds *cache.Dataset, rec *record.Record, src *record.Member, p string, w *streamWriter, buf []byte) error {
	for _, own := range rec.Held(n.o.Store.NodeID()) {
		if own.Set != src.Set || own.ID == src.ID {
			continue
		}
		_, err := schemes.ReadCopy(ds.ShareDir(own.ID), own.Node, src.Rank, p, w, buf)
		if errors.Is(err, os.ErrNotExist) && w.rep.Size == 0 {
			continue // this member keeps no copy of src
		}
		return err
	}
	return fmt.Errorf("node %d keeps no copy of member %.12s's files of %s: %w", n.self, src.ID, rec.Dataset, ErrNotHeld)
}

// streamWriter sends what is written to it over a stream, counting its
// length and CRC32C.
type streamWriter struct {
	ctx context.Context
	s   jobnet.Stream
	rep readReply
}

func (w *streamWriter) Write(b []byte) (int, error) {
	if err := w.s.Send(w.ctx, b); err != nil {
		return 0, err
	}
	w.rep.CRC = crc32.Update(w.rep.CRC, castagnoli, b)
	w.rep.Size += int64(len(b))
	return len(b), nil
}

// recordedCRC returns the CRC32C the member's redundancy file recorded for
// file p, if the scheme computed one.
func recordedCRC(dir string, mem *record.Member, p string) (uint32, bool, error) {
	files, err := schemes.MemberFiles(dir, mem.Node)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil // not protected (yet): the transfer's own CRC only
	}
	if err != nil {
		return 0, false, err
	}
	for _, f := range files {
		if f.Path == p && f.Type == schemes.Regular {
			return f.CRC32C, f.HasCRC, nil
		}
	}
	return 0, false, fmt.Errorf("%s is not a file of member %.12s: %w", p, mem.ID, ErrNotHeld)
}
