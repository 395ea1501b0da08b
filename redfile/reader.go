package redfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/layout"
)

// File is an open, checked redundancy file. Segment reads verify every
// block they touch against the trailer before returning bytes.
type File struct {
	path string
	f    *os.File
	lay  *redLayout
	// first[i] is the index in lay.crcs of segment i's first block.
	first []int64
}

// Open opens the redundancy file at path and checks everything but its
// data (as ReadHeader does). Errors wrap ErrCorrupt for damaged files.
func Open(path string) (*File, error) {
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
	r := &File{path: path, f: f, lay: lay}
	bs := int64(lay.hdr.BlockSize)
	var n int64
	for _, s := range lay.hdr.Segments {
		r.first = append(r.first, n)
		n += (s.Length + bs - 1) / bs
	}
	return r, nil
}

// Header returns the file's checked header; it belongs to the File.
func (r *File) Header() *Header { return r.lay.hdr }

// Close closes the file.
func (r *File) Close() error { return r.f.Close() }

// SegReader reads verified bytes from one File; each goroutine uses its
// own, since it caches the last block for unaligned reads.
type SegReader struct {
	r        *File
	blk      []byte
	blkSeg   int
	blkIndex int64
}

// Reader returns a new reader of r's segments.
func (r *File) Reader() *SegReader { return &SegReader{r: r, blkSeg: -1} }

// ReadAt fills dst from segment seg at offset off. Reads of whole aligned
// blocks go straight into dst; others go through a one-block cache.
func (s *SegReader) ReadAt(seg int, off int64, dst []byte) error {
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
func (s *SegReader) readBlock(seg int, b int64, dst []byte) error {
	hdr := s.r.lay.hdr
	at := PreambleSize + hdr.Segments[seg].Offset + b*int64(hdr.BlockSize)
	got, err := crc32c.ReadAt(s.r.f, dst, at)
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

// VerifyAll reads every data block and checks its CRC; buf (may be nil) is
// the read buffer, grown to a block if shorter.
func (r *File) VerifyAll(buf []byte) error {
	hdr := r.lay.hdr
	sr := r.Reader()
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

// Find returns the path of the redundancy file of node in the dataset
// directory dir; an error wrapping fs.ErrNotExist when it has none.
func Find(dir string, node int) (string, error) {
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

// MemberFiles returns the file metadata, with each regular file's CRC32C
// where the encode computed one, that the redundancy file of node in the
// dataset directory dir records for that member itself: how a node
// serving one of its files to another can prove the bytes are still those
// it protected. Errors wrap fs.ErrNotExist when there is no such file and
// ErrCorrupt when its header does not check.
func MemberFiles(dir string, node int) ([]files.Meta, error) {
	path, err := Find(dir, node)
	if err != nil {
		return nil, err
	}
	h, err := ReadHeader(path)
	if err != nil {
		return nil, err
	}
	return h.Members[0].Files, nil
}

// ReadCopy writes to w the bytes of regular file p of member src of a
// PARTNER set, as the redundancy file of node in the dataset directory dir
// holds them (a partner keeps full copies of its sources' files in their
// segments), and returns the file's metadata as src's encode recorded it.
// Every block read is checked against the redundancy file's trailer, and
// the whole file against its recorded CRC32C: what reaches w is what src
// protected, or an error wrapping ErrCorrupt. buf is the read buffer (its
// length sets the read size). Errors wrap fs.ErrNotExist when node's file
// holds no copy of src or src wrote no file p.
func ReadCopy(dir string, node, src int, p string, w io.Writer, buf []byte) (files.Meta, error) {
	path, err := Find(dir, node)
	if err != nil {
		return files.Meta{}, err
	}
	r, err := Open(path)
	if err != nil {
		return files.Meta{}, err
	}
	defer r.Close()
	hdr := r.Header()
	seg := -1
	for i, sg := range hdr.Segments {
		if sg.Rank == src {
			seg = i
		}
	}
	mem, ok := hdr.Member(src)
	if hdr.Scheme != layout.KindPartner || seg < 0 || !ok {
		return files.Meta{}, fmt.Errorf("%s holds no copy of member %d: %w", path, src, os.ErrNotExist)
	}
	var start int64
	var meta *files.Meta
	for i := range mem.Files {
		f := &mem.Files[i]
		if f.Type != files.Regular {
			continue
		}
		if f.Path == p {
			meta = f
			break
		}
		start += f.HeldBytes()
	}
	if meta == nil {
		return files.Meta{}, fmt.Errorf("member %d wrote no file %s: %w", src, p, os.ErrNotExist)
	}
	// The copy holds the bytes the member held of the file (its ranges,
	// for a file several nodes wrote), one after the other; the file
	// reads as zeros between them.
	sr := r.Reader()
	var crc uint32
	var at int64 // in the file
	emit := func(b []byte) error {
		crc = crc32c.Update(crc, b)
		_, err := w.Write(b)
		return err
	}
	zeros := func(n int64) error {
		for n > 0 {
			b := buf[:min(int64(len(buf)), n)]
			clear(b)
			if err := emit(b); err != nil {
				return err
			}
			n -= int64(len(b))
		}
		return nil
	}
	for _, rg := range meta.Held() {
		if err := zeros(rg.Off - at); err != nil {
			return files.Meta{}, err
		}
		for off := int64(0); off < rg.Len; {
			b := buf[:min(int64(len(buf)), rg.Len-off)]
			if err := sr.ReadAt(seg, start+off, b); err != nil {
				return files.Meta{}, err
			}
			if err := emit(b); err != nil {
				return files.Meta{}, err
			}
			off += int64(len(b))
		}
		start, at = start+rg.Len, rg.End()
	}
	if err := zeros(meta.Size - at); err != nil {
		return files.Meta{}, err
	}
	if meta.HasCRC && crc != meta.CRC32C {
		return files.Meta{}, fmt.Errorf("%w: the copy of %s of member %d in %s: crc32c %08x, recorded %08x", ErrCorrupt, p, src, path, crc, meta.CRC32C)
	}
	return *meta, nil
}
