package redfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/layout"
)

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

// Writer writes a redundancy file: segments first (each sequentially,
// possibly from different goroutines), then header, trailer and preamble,
// then fsync and rename, so the final name never shows a partial file.
type Writer struct {
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

// Create removes node's older redundancy files from the dataset directory
// that holds path (path is <dataset>/.scrfs/<name>) and starts writing
// path.tmp with the given segments (their Offset is computed here) and
// blockSize bytes per trailer CRC, over a spare file when spare (may be
// nil) offers one.
func Create(path string, node, blockSize int, segs []Segment, spare func() string) (*Writer, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	if err := removeOld(filepath.Dir(dir), node, filepath.Base(path)); err != nil {
		return nil, err
	}
	w := &Writer{path: path, tmp: path + ".tmp", bs: blockSize}
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
// kept whole (Finish cuts it to size), or else a new empty file. A spare's
// old preamble is wiped first, so that until Finish writes the new one the
// file has no magic, as a new file would not. A spare that cannot be used is
// deleted: taking it made it ours.
func openTmp(tmp string, spare func() string) (*os.File, error) {
	if spare != nil {
		if p := spare(); p != "" {
			if err := os.Rename(p, tmp); err != nil {
				os.Remove(p)
			} else if f, err := os.OpenFile(tmp, os.O_RDWR, 0); err == nil {
				if _, err := f.WriteAt(make([]byte, PreambleSize), 0); err == nil {
					return f, nil
				}
				f.Close()
			}
		}
	}
	return os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
}

// Write appends b to segment i.
func (w *Writer) Write(i int, b []byte) error {
	s := &w.segs[i]
	if s.written+int64(len(b)) > s.seg.Length {
		return fmt.Errorf("write %s: segment %d overflows its %d bytes", w.tmp, i, s.seg.Length)
	}
	if _, err := w.f.WriteAt(b, PreambleSize+s.seg.Offset+s.written); err != nil {
		return fmt.Errorf("write %s: %w", w.tmp, err)
	}
	s.crc.write(b)
	s.written += int64(len(b))
	return nil
}

// File returns the file being written, for bytes that go into it without
// Write (spliced from the network at At, then reported with Spliced).
func (w *Writer) File() *os.File { return w.f }

// At returns where the next n bytes of segment i go in the file, checking
// they fit.
func (w *Writer) At(i, n int) (int64, error) {
	s := &w.segs[i]
	if s.written+int64(n) > s.seg.Length {
		return 0, fmt.Errorf("write %s: segment %d overflows its %d bytes", w.tmp, i, s.seg.Length)
	}
	return PreambleSize + s.seg.Offset + s.written, nil
}

// CanSplice reports whether the next n bytes of segment i can take a CRC32C
// computed by someone else (spliced): they must start a block and not
// exceed it, since the trailer holds one CRC per block.
func (w *Writer) CanSplice(i, n int) bool {
	s := &w.segs[i]
	return s.crc.curLen == 0 && int64(n) <= s.crc.bs
}

// Spliced records that n bytes whose CRC32C is crc were written to segment
// i at w.At(i, n) by someone else (a splice from the network).
func (w *Writer) Spliced(i, n int, crc uint32) error {
	s := &w.segs[i]
	if err := s.crc.add(int64(n), crc); err != nil {
		return fmt.Errorf("write %s: %w", w.tmp, err)
	}
	s.written += int64(n)
	return nil
}

// Finish completes the file with header h (its Segments and BlockSize are
// filled in here) and renames it into place.
func (w *Writer) Finish(h *Header) error {
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
	if _, err := w.f.WriteAt(tail, PreambleSize+dataLen); err != nil {
		return fmt.Errorf("write %s: %w", w.tmp, err)
	}
	pre := preamble{version: Version, headerLen: uint32(len(hb) - 4), dataLen: uint64(dataLen), blockSize: uint32(w.bs)}
	// The preamble goes last: until it is written the file has no magic,
	// so even the .tmp of a crashed writer never passes for a good file.
	if _, err := w.f.WriteAt(pre.encode(), 0); err != nil {
		return fmt.Errorf("write %s: %w", w.tmp, err)
	}
	// A spare may be longer than this file.
	if err := w.f.Truncate(PreambleSize + dataLen + int64(len(tail))); err != nil {
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

// Abort removes the temporary file; safe after Finish and on nil.
func (w *Writer) Abort() {
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

// blockCRCs accumulates the per-block CRC32Cs of a segment written
// sequentially in pieces of any size.
type blockCRCs struct {
	bs     int64
	crcs   []uint32
	cur    uint32
	curLen int64
}

func (b *blockCRCs) write(p []byte) {
	for len(p) > 0 {
		n := min(int64(len(p)), b.bs-b.curLen)
		b.cur = crc32c.Update(b.cur, p[:n])
		b.curLen += n
		p = p[n:]
		if b.curLen == b.bs {
			b.crcs = append(b.crcs, b.cur)
			b.cur, b.curLen = 0, 0
		}
	}
}

// add appends n bytes whose CRC32C the caller knows (a spliced piece
// whose sender computed it). The segment must be at a block boundary, and
// n at most a block; a shorter run is continued by later writes as any
// partial block is.
func (b *blockCRCs) add(n int64, crc uint32) error {
	if b.curLen != 0 || n > b.bs {
		return fmt.Errorf("internal error: %d bytes with a known CRC at block offset %d (block size %d)", n, b.curLen, b.bs)
	}
	b.cur, b.curLen = crc, n
	if b.curLen == b.bs {
		b.crcs = append(b.crcs, b.cur)
		b.cur, b.curLen = 0, 0
	}
	return nil
}

// finish closes the last partial block and returns all block CRCs.
func (b *blockCRCs) finish() []uint32 {
	if b.curLen > 0 {
		b.crcs = append(b.crcs, b.cur)
		b.cur, b.curLen = 0, 0
	}
	return b.crcs
}
