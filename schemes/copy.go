package schemes

import (
	"fmt"
	"io"
	"os"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
)

// ReadCopy writes to w the bytes of regular file p of member src of a
// PARTNER set, as the redundancy file of node in the dataset directory dir
// holds them (a partner keeps full copies of its sources' files), and
// returns the file's metadata as src's encode recorded it. Every block read
// is checked against the redundancy file's trailer, and the whole file
// against its recorded CRC32C: what reaches w is what src protected, or an
// error wrapping ErrCorrupt. buf is the read buffer (its length sets the
// read size). Errors wrap fs.ErrNotExist when node's file holds no copy of
// src or src wrote no file p.
func ReadCopy(dir string, node, src int, p string, w io.Writer, buf []byte) (files.Meta, error) {
	path, err := redFileOf(dir, node)
	if err != nil {
		return files.Meta{}, err
	}
	r, err := openRedFile(path)
	if err != nil {
		return files.Meta{}, err
	}
	defer r.close()
	hdr := r.lay.hdr
	seg := -1
	for i, sg := range hdr.Segments {
		if sg.Rank == src {
			seg = i
		}
	}
	mem, ok := hdr.member(src)
	if hdr.Scheme != Partner.String() || seg < 0 || !ok {
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
		start += f.Size
	}
	if meta == nil {
		return files.Meta{}, fmt.Errorf("member %d wrote no file %s: %w", src, p, os.ErrNotExist)
	}
	sr := r.reader()
	var crc uint32
	for off := int64(0); off < meta.Size; {
		b := buf[:min(int64(len(buf)), meta.Size-off)]
		if err := sr.readAt(seg, start+off, b); err != nil {
			return files.Meta{}, err
		}
		crc = crc32c.Update(crc, b)
		if _, err := w.Write(b); err != nil {
			return files.Meta{}, err
		}
		off += int64(len(b))
	}
	if meta.HasCRC && crc != meta.CRC32C {
		return files.Meta{}, fmt.Errorf("%w: the copy of %s of member %d in %s: crc32c %08x, recorded %08x", ErrCorrupt, p, src, path, crc, meta.CRC32C)
	}
	return *meta, nil
}
