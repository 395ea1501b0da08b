package namespace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/redfile"
)

// handleRead serves a range of one file of a share this node holds,
// checked against the CRC32C recorded when the dataset was protected; or,
// asked for a copy, the whole file of a PARTNER source from the copy this
// node keeps (checked as it is read).
func (n *Namespace) handleRead(ctx context.Context, from int, m readReq) (any, error) {
	ds := n.o.Store.Get(m.Dataset)
	if ds == nil || ds.Info().Seq == 0 {
		return nil, fmt.Errorf("node %d holds no recorded copy of %s: %w", n.self, m.Dataset, ErrNotHeld)
	}
	held := func(rec *record.Record) *record.Member {
		mem := rec.Member(m.Member)
		if mem == nil || (!m.Copy && mem.HeldBy() != n.o.Store.NodeID()) {
			return nil
		}
		return mem
	}
	rec, err := n.recordOf(ds)
	if err != nil {
		return nil, err
	}
	mem := held(rec)
	if mem == nil {
		// Refuse on the record as it is on disk, not as it was viewed.
		n.Revised(m.Dataset)
		if rec, err = n.recordOf(ds); err != nil {
			return nil, err
		}
		if mem = held(rec); mem == nil {
			return nil, fmt.Errorf("node %d does not hold member %.12s's share of %s: %w", n.self, m.Member, m.Dataset, ErrNotHeld)
		}
	}
	s, err := n.net.OpenStream(ctx, from, m.Stream)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	w := newPieceSender(ctx, s)
	if m.Copy {
		err = n.sendCopy(ds, rec, mem, m.Path, w)
	} else {
		err = n.sendOwn(ds.ShareDir(mem.ID), mem, m, w)
	}
	if err != nil {
		return nil, err
	}
	return readReply{Size: w.sent}, nil
}

// sendOwn sends the range m asks for of file m.Path of member mem's share,
// kept in dir, once the whole file is known to match what was protected
// (a whole file not checked yet: as it is checked).
func (n *Namespace) sendOwn(dir string, mem *record.Member, m readReq, w *pieceSender) error {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(path.Clean(m.Path))))
	if err != nil {
		return fmt.Errorf("node %d: %w", n.self, err)
	}
	defer f.Close()
	var each func(uint32, []byte) error
	if m.Offset == 0 && m.Length == 0 {
		each = w.send
	}
	vf, sent, err := n.verify(m.Dataset, dir, mem, m.Path, f, each)
	if err != nil || sent {
		return err
	}
	size := vf.id.size
	length := size - m.Offset
	if m.Length > 0 {
		length = m.Length
	}
	if length < 0 || m.Offset+length > size {
		return fmt.Errorf("%s/%s on node %d: %d bytes at %d asked for, the file has %d", m.Dataset, m.Path, n.self, length, m.Offset, size)
	}
	if length == 0 {
		return nil
	}
	if m.Offset%blockSize != 0 || (length%blockSize != 0 && m.Offset+length != size) {
		// A piece of a file several members wrote (shared.go): it need
		// not start at a block whose CRC32C the check took. The file is
		// the one checked (verify compared its inode, size and times), so
		// the CRC32C taken now is of checked bytes.
		return readAhead(f, m.Offset, length, true, func(_ int64, crc uint32, b []byte) error { return w.send(crc, b) })
	}
	return readAhead(f, m.Offset, length, false, func(at int64, _ uint32, b []byte) error {
		return w.send(vf.blocks[at/blockSize], b)
	})
}

// sendCopy sends file p of PARTNER member src from the copy kept by a
// member whose share this node holds.
func (n *Namespace) sendCopy(ds *cache.Dataset, rec *record.Record, src *record.Member, p string, w *pieceSender) error {
	bp := pieceBufs.Get().(*[]byte)
	defer pieceBufs.Put(bp)
	rbp := pieceBufs.Get().(*[]byte)
	defer pieceBufs.Put(rbp)
	pw := &pieceWriter{pieceSender: w, buf: (*bp)[:0]}
	for _, own := range rec.Held(n.o.Store.NodeID()) {
		if own.Set != src.Set || own.ID == src.ID {
			continue
		}
		_, err := redfile.ReadCopy(ds.ShareDir(own.ID), own.Node, src.Rank, p, pw, *rbp)
		if errors.Is(err, os.ErrNotExist) && w.sent == 0 && len(pw.buf) == 0 {
			continue // this member keeps no copy of src
		}
		if err != nil {
			return err
		}
		return pw.Flush()
	}
	return fmt.Errorf("node %d keeps no copy of member %.12s's files of %s: %w", n.self, src.ID, rec.Dataset, ErrNotHeld)
}
