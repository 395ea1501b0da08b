package schemes

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
)

// fileName returns the redundancy file name of member rank, as redset names
// it (layout.RedundancyFileName).
func fileName(kind Kind, set SetInfo, rank int) string {
	return layout.RedundancyFileName(set.Nodes[rank], kind.String(), set.Group, set.Groups, rank, len(set.Nodes))
}

// redPath returns where member m keeps its redundancy file.
func redPath(p Params, m Member) string {
	return filepath.Join(m.Dir, layout.MetaDir, fileName(p.Kind, m.Set, m.Rank))
}

// removeOld deletes this node's older redundancy files (and leftovers of
// interrupted writes) from dir/.scrfs, keeping keep. Files of other nodes
// are left alone.
func removeOld(dir string, node int, keep string) error {
	meta := filepath.Join(dir, layout.MetaDir)
	ents, err := os.ReadDir(meta)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("list %s: %w", meta, err)
	}
	prefix := fmt.Sprintf("%d.", node)
	for _, e := range ents {
		n := e.Name()
		if n == keep || !strings.HasPrefix(n, prefix) ||
			!(strings.HasSuffix(n, ".redset") || strings.HasSuffix(n, ".redset.tmp")) {
			continue
		}
		if err := os.Remove(filepath.Join(meta, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove old redundancy file: %w", err)
		}
	}
	return nil
}

// redWriter writes a redundancy file: segments first (each sequentially,
// possibly from different goroutines), then header, trailer and preamble,
// then fsync and rename, so the final name never shows a partial file.
type redWriter struct {
	path, tmp string
	f         *os.File
	bs        int
	segs      []segWriter
}

// segWriter is the state of one segment; only one goroutine writes a given
// segment.
type segWriter struct {
	seg     Segment
	written int64
	crc     blockCRCs
}

// createRedFile removes this member's older redundancy files and starts
// writing path.tmp with the given segments (their Offset is computed here),
// over a spare file when spare (may be nil) offers one.
func createRedFile(path string, node, blockSize int, segs []Segment, spare func() string) (*redWriter, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	if err := removeOld(filepath.Dir(dir), node, filepath.Base(path)); err != nil {
		return nil, err
	}
	w := &redWriter{path: path, tmp: path + ".tmp", bs: blockSize}
	f, err := openTmp(w.tmp, spare)
	if err != nil {
		return nil, fmt.Errorf("create redundancy file: %w", err)
	}
	w.f = f
	var off int64
	for _, sg := range segs {
		sg.Offset = off
		w.segs = append(w.segs, segWriter{seg: sg, crc: blockCRCs{bs: int64(blockSize)}})
		off += sg.Length
	}
	return w, nil
}

// openTmp opens tmp for writing from scratch: a spare renamed to tmp and
// kept whole (finish cuts it to size), or else a new empty file. A spare's
// old preamble is wiped first, so that until finish writes the new one the
// file has no magic, as a new file would not. A spare that cannot be used is
// deleted: taking it made it ours.
func openTmp(tmp string, spare func() string) (*os.File, error) {
	if spare != nil {
		if p := spare(); p != "" {
			if err := os.Rename(p, tmp); err != nil {
				os.Remove(p)
			} else if f, err := os.OpenFile(tmp, os.O_RDWR, 0); err == nil {
				if _, err := f.WriteAt(make([]byte, preambleSize), 0); err == nil {
					return f, nil
				}
				f.Close()
			}
		}
	}
	return os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
}

// write appends b to segment i.
func (w *redWriter) write(i int, b []byte) error {
	s := &w.segs[i]
	if s.written+int64(len(b)) > s.seg.Length {
		return fmt.Errorf("write %s: segment %d overflows its %d bytes", w.tmp, i, s.seg.Length)
	}
	if _, err := w.f.WriteAt(b, preambleSize+s.seg.Offset+s.written); err != nil {
		return fmt.Errorf("write %s: %w", w.tmp, err)
	}
	s.crc.write(b)
	s.written += int64(len(b))
	return nil
}

// at returns where the next n bytes of segment i go in the file, checking
// they fit.
func (w *redWriter) at(i, n int) (int64, error) {
	s := &w.segs[i]
	if s.written+int64(n) > s.seg.Length {
		return 0, fmt.Errorf("write %s: segment %d overflows its %d bytes", w.tmp, i, s.seg.Length)
	}
	return preambleSize + s.seg.Offset + s.written, nil
}

// canSplice reports whether the next n bytes of segment i can take a CRC32C
// computed by someone else (spliced): they must start a block and not
// exceed it, since the trailer holds one CRC per block.
func (w *redWriter) canSplice(i, n int) bool {
	s := &w.segs[i]
	return s.crc.curLen == 0 && int64(n) <= s.crc.bs
}

// spliced records that n bytes whose CRC32C is crc were written to segment
// i at w.at(i, n) by someone else (a splice from the network).
func (w *redWriter) spliced(i, n int, crc uint32) error {
	s := &w.segs[i]
	if err := s.crc.add(int64(n), crc); err != nil {
		return fmt.Errorf("write %s: %w", w.tmp, err)
	}
	s.written += int64(n)
	return nil
}

// finish completes the file with header h (its Segments and BlockSize are
// filled in here) and renames it into place.
func (w *redWriter) finish(h *Header) error {
	var crcs []uint32
	h.BlockSize = w.bs
	h.Segments = nil
	var dataLen int64
	for i := range w.segs {
		s := &w.segs[i]
		if s.written != s.seg.Length {
			return fmt.Errorf("finish %s: segment %d has %d of %d bytes", w.tmp, i, s.written, s.seg.Length)
		}
		crcs = append(crcs, s.crc.finish()...)
		h.Segments = append(h.Segments, s.seg)
		dataLen += s.seg.Length
	}
	hb, err := encodeHeader(h)
	if err != nil {
		return err
	}
	tail := append(hb, encodeTrailer(crcs)...)
	if _, err := w.f.WriteAt(tail, preambleSize+dataLen); err != nil {
		return fmt.Errorf("write %s: %w", w.tmp, err)
	}
	pre := preamble{version: fileVersion, headerLen: uint32(len(hb) - 4), dataLen: uint64(dataLen), blockSize: uint32(w.bs)}
	// The preamble goes last: until it is written the file has no magic,
	// so even the .tmp of a crashed writer never passes for a good file.
	if _, err := w.f.WriteAt(pre.encode(), 0); err != nil {
		return fmt.Errorf("write %s: %w", w.tmp, err)
	}
	// A spare may be longer than this file.
	if err := w.f.Truncate(preambleSize + dataLen + int64(len(tail))); err != nil {
		return fmt.Errorf("truncate %s: %w", w.tmp, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", w.tmp, err)
	}
	if err := w.f.Close(); err != nil {
		w.f = nil
		return fmt.Errorf("close %s: %w", w.tmp, err)
	}
	w.f = nil
	if err := os.Rename(w.tmp, w.path); err != nil {
		return fmt.Errorf("rename %s: %w", w.tmp, err)
	}
	return syncDir(filepath.Dir(w.path))
}

// abort removes the temporary file; safe after finish and on nil.
func (w *redWriter) abort() {
	if w == nil {
		return
	}
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	os.Remove(w.tmp)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// redFile is an open, checked redundancy file. Segment reads verify every
// block they touch against the trailer before returning bytes.
type redFile struct {
	path string
	f    *os.File
	lay  *redLayout
	// first[i] is the index in lay.crcs of segment i's first block.
	first []int64
}

func openRedFile(path string) (*redFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open redundancy file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open redundancy file: %w", err)
	}
	lay, err := readLayout(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	r := &redFile{path: path, f: f, lay: lay}
	bs := int64(lay.hdr.BlockSize)
	var n int64
	for _, s := range lay.hdr.Segments {
		r.first = append(r.first, n)
		n += (s.Length + bs - 1) / bs
	}
	return r, nil
}

func (r *redFile) close() error { return r.f.Close() }

// segReader reads verified bytes from one redFile; each goroutine uses its
// own, since it caches the last block for unaligned reads.
type segReader struct {
	r        *redFile
	blk      []byte
	blkSeg   int
	blkIndex int64
}

func (r *redFile) reader() *segReader { return &segReader{r: r, blkSeg: -1} }

// readAt fills dst from segment seg at offset off. Reads of whole aligned
// blocks go straight into dst; others go through a one-block cache.
func (s *segReader) readAt(seg int, off int64, dst []byte) error {
	hdr := s.r.lay.hdr
	sg := hdr.Segments[seg]
	if off < 0 || off+int64(len(dst)) > sg.Length {
		return fmt.Errorf("read %s: segment %d range [%d, %d) outside its %d bytes", s.r.path, seg, off, off+int64(len(dst)), sg.Length)
	}
	bs := int64(hdr.BlockSize)
	for len(dst) > 0 {
		b := off / bs
		in := off - b*bs
		blen := min(bs, sg.Length-b*bs)
		if in == 0 && int64(len(dst)) >= blen {
			if err := s.readBlock(seg, b, dst[:blen]); err != nil {
				return err
			}
			dst, off = dst[blen:], off+blen
			continue
		}
		if s.blkSeg != seg || s.blkIndex != b {
			if cap(s.blk) < int(bs) {
				s.blk = make([]byte, bs)
			}
			s.blkSeg = -1
			if err := s.readBlock(seg, b, s.blk[:blen]); err != nil {
				return err
			}
			s.blkSeg, s.blkIndex = seg, b
		}
		n := copy(dst, s.blk[in:blen])
		dst, off = dst[n:], off+int64(n)
	}
	return nil
}

// readBlock reads block b of segment seg into dst (exactly the block) and
// checks its CRC.
func (s *segReader) readBlock(seg int, b int64, dst []byte) error {
	hdr := s.r.lay.hdr
	at := preambleSize + hdr.Segments[seg].Offset + b*int64(hdr.BlockSize)
	got, err := readWithCRC(s.r.f, dst, at)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: %s: short read at offset %d", ErrCorrupt, s.r.path, at)
		}
		return fmt.Errorf("read %s: %w", s.r.path, err)
	}
	if want := s.r.lay.crcs[s.r.first[seg]+b]; got != want {
		return fmt.Errorf("%w: %s: block at offset %d: crc32c %08x, recorded %08x", ErrCorrupt, s.r.path, at, got, want)
	}
	return nil
}

// verifyAll reads every data block and checks its CRC.
func (r *redFile) verifyAll(buf []byte) error {
	hdr := r.lay.hdr
	sr := r.reader()
	bs := int64(hdr.BlockSize)
	if int64(cap(buf)) < bs {
		buf = make([]byte, bs)
	}
	for i, sg := range hdr.Segments {
		for b := int64(0); b*bs < sg.Length; b++ {
			if err := sr.readBlock(i, b, buf[:min(bs, sg.Length-b*bs)]); err != nil {
				return err
			}
		}
	}
	return nil
}

// MemberFiles returns the file metadata, with each regular file's CRC32C
// where the encode computed one, that the redundancy file of node in the
// dataset directory dir records for that member itself: how a node
// serving one of its files to another can prove the bytes are still those
// it protected. Errors wrap fs.ErrNotExist when there is no such file and
// ErrCorrupt when its header does not check.
func MemberFiles(dir string, node int) ([]files.Meta, error) {
	path, err := redFileOf(dir, node)
	if err != nil {
		return nil, err
	}
	h, err := ReadHeader(path)
	if err != nil {
		return nil, err
	}
	return h.Members[0].Files, nil
}

// redFileOf returns the path of the redundancy file of node in the dataset
// directory dir.
func redFileOf(dir string, node int) (string, error) {
	meta := filepath.Join(dir, layout.MetaDir)
	ents, err := os.ReadDir(meta)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		n, _, _, _, _, _, err := layout.ParseRedundancyFileName(e.Name())
		if err == nil && n == node {
			return filepath.Join(meta, e.Name()), nil
		}
	}
	return "", fmt.Errorf("no redundancy file of node %d in %s: %w", node, meta, os.ErrNotExist)
}
