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
func (n *Namespace) Materialize(ctx context.Context, dataset string, e *Entry) (string, error) {
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

// fetch copies file p of e's member from its holder into dst, retrying
// while the holder is unreachable or does not hold the share yet (it may be
// restarting, or being rebuilt), at most MemberTimeout.
func (n *Namespace) fetch(ctx context.Context, dataset string, e *Entry, p, dst string) error {
	deadline := time.Now().Add(n.o.MemberTimeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		node := n.holder(e) // a stock-taking may move it meanwhile
		err := n.fetchOnce(ctx, dataset, e, node, p, dst)
		retry := errors.Is(err, ErrNotHeld) || (err != nil && !jobnet.IsRemote(err))
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

func (n *Namespace) fetchOnce(ctx context.Context, dataset string, e *Entry, node int, p, dst string) error {
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
	sid := "ns/" + jobnet.NewToken()
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
	err = n.o.Mux.Call(ctx, node, "ns-read", readReq{Dataset: dataset, Member: e.Member, Path: p, Stream: sid}, &rep)
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
// against the CRC32C recorded when the dataset was protected.
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
	if mem == nil || mem.HeldBy() != n.o.Store.NodeID() {
		return nil, fmt.Errorf("node %d does not hold member %.12s's share of %s: %w", n.self, m.Member, m.Dataset, ErrNotHeld)
	}
	dir := ds.ShareDir(mem.ID)
	want, known, err := recordedCRC(dir, mem, m.Path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(path.Clean(m.Path))))
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", n.self, err)
	}
	defer f.Close()
	s, err := n.o.Mux.OpenStream(ctx, from, m.Stream)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	bp := pieces.Get().(*[]byte)
	defer pieces.Put(bp)
	var rep readReply
	for {
		k, rerr := io.ReadFull(f, *bp)
		if k > 0 {
			rep.CRC = crc32.Update(rep.CRC, castagnoli, (*bp)[:k])
			rep.Size += int64(k)
			if err := s.Send(ctx, (*bp)[:k]); err != nil {
				return nil, err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return nil, rerr
		}
	}
	if known && rep.CRC != want {
		return nil, fmt.Errorf("%s/%s on node %d no longer matches the CRC32C recorded when it was protected: %w",
			m.Dataset, m.Path, n.self, schemes.ErrCorrupt)
	}
	return rep, nil
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
