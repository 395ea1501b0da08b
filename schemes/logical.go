package schemes

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
)

// maxOpenFiles bounds the descriptors one logical file keeps open: XOR and
// RS touch p-1 places of the logical file in turn, so a handful suffices
// even for members with thousands of files.
const maxOpenFiles = 16

// logicalFile maps offsets of a member's logical file (the bytes its
// regular files hold, one after the other, zero-padded beyond the end) to
// the files. A file several nodes wrote, of which the member holds only
// ranges (files.Meta.Partial), contributes just those: its logical bytes
// are its segments, and the file reads as zeros between them. One
// goroutine uses an instance at a time; the CRC tracker may be shared.
type logicalFile struct {
	paths []string // file to open for each regular file
	shown []string // dataset-relative names, for errors
	sizes []int64  // each regular file's size
	segs  []segment
	size  int64
	write bool
	crcs  *fileCRCs // nil: no tracking
	open  map[int]*os.File
	order []int // open files, oldest first
}

// segment is a run of logical bytes that one file holds contiguously.
type segment struct {
	file  int   // index of the regular file
	at    int64 // where the run starts in the file
	start int64 // where it starts in the logical file
	n     int64
}

func (g segment) end() int64 { return g.start + g.n }

func newLogical(list []files.Meta) *logicalFile {
	l := &logicalFile{open: make(map[int]*os.File)}
	for i := range list {
		f := &list[i]
		if f.Type != files.Regular {
			continue
		}
		idx := len(l.shown)
		l.shown = append(l.shown, f.Path)
		l.sizes = append(l.sizes, f.Size)
		for _, r := range f.Held() {
			l.segs = append(l.segs, segment{file: idx, at: r.Off, start: l.size, n: r.Len})
			l.size += r.Len
		}
	}
	return l
}

// newLogicalReader reads the regular files of files under dir.
func newLogicalReader(dir string, list []files.Meta, crcs *fileCRCs) *logicalFile {
	l := newLogical(list)
	for _, p := range l.shown {
		l.paths = append(l.paths, filepath.Join(dir, filepath.FromSlash(p)))
	}
	l.crcs = crcs
	return l
}

// sibling returns another reader of l's files, for a second goroutine to
// use alongside l; both feed l's CRC tracker.
func (l *logicalFile) sibling() *logicalFile {
	c := *l
	c.open, c.order = make(map[int]*os.File), nil
	return &c
}

// newLogicalWriter writes the regular files of files as stage/<index>, each
// created here at its size, so zero-length files exist too and the bytes a
// member does not hold of a file several nodes wrote read as zeros.
// Staging under numbers rather than names keeps untrusted paths out of the
// picture until place checks and creates them.
func newLogicalWriter(stage string, list []files.Meta, crcs *fileCRCs) (*logicalFile, error) {
	l := newLogical(list)
	l.write = true
	l.crcs = crcs
	for i := range l.shown {
		p := filepath.Join(stage, strconv.Itoa(i))
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", l.shown[i], err)
		}
		err = f.Truncate(l.sizes[i])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", l.shown[i], err)
		}
		l.paths = append(l.paths, p)
	}
	return l, nil
}

// file returns the open descriptor of file i, opening it (and closing the
// oldest) as needed. Readers check that the file still has its recorded
// size, so a file changed behind scrfs's back is noticed, not encoded.
func (l *logicalFile) file(i int) (*os.File, error) {
	if f, ok := l.open[i]; ok {
		return f, nil
	}
	if len(l.order) >= maxOpenFiles {
		old := l.order[0]
		l.order = l.order[1:]
		l.open[old].Close()
		delete(l.open, old)
	}
	flag := os.O_RDONLY
	if l.write {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(l.paths[i], flag, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !l.write {
			return nil, fmt.Errorf("%w: %s is gone: %v", ErrMismatch, l.shown[i], err)
		}
		return nil, fmt.Errorf("open %s: %w", l.shown[i], err)
	}
	if !l.write {
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("stat %s: %w", l.shown[i], err)
		}
		if !st.Mode().IsRegular() || st.Size() != l.sizes[i] {
			f.Close()
			return nil, fmt.Errorf("%w: %s is %v of %d bytes, recorded a regular file of %d", ErrMismatch, l.shown[i], st.Mode().Type(), st.Size(), l.sizes[i])
		}
	}
	l.open[i] = f
	l.order = append(l.order, i)
	return f, nil
}

// locate returns the first segment whose bytes reach past off.
func (l *logicalFile) locate(off int64) int {
	return sort.Search(len(l.segs), func(i int) bool { return l.segs[i].end() > off })
}

// within returns the file that holds all of the logical bytes [off,
// off+n) and where they start in it, or ok false when they span segments
// or reach into the padding.
func (l *logicalFile) within(off int64, n int) (i int, in int64, ok bool) {
	k := l.locate(off)
	if n <= 0 || k >= len(l.segs) || off+int64(n) > l.segs[k].end() {
		return 0, 0, false
	}
	g := l.segs[k]
	return g.file, g.at + off - g.start, true
}

// each calls fn for the runs of the logical bytes [off, off+len(p)) that
// segments hold, in order: the file, where the run starts in it, and its
// part of p. It returns the rest of p, which lies in the padding.
func (l *logicalFile) each(p []byte, off int64, fn func(file int, at int64, b []byte) error) ([]byte, error) {
	for k := l.locate(off); len(p) > 0 && k < len(l.segs); k++ {
		g := l.segs[k]
		in := off - g.start
		n := min(int64(len(p)), g.n-in)
		if n <= 0 {
			continue
		}
		if err := fn(g.file, g.at+in, p[:n]); err != nil {
			return nil, err
		}
		p, off = p[n:], off+n
	}
	return p, nil
}

// readErr describes a failed read of file i that needed end bytes.
func (l *logicalFile) readErr(i int, end int64, err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s shrank below %d bytes", ErrMismatch, l.shown[i], end)
	}
	return fmt.Errorf("read %s: %w", l.shown[i], err)
}

// readAt fills p with the logical bytes at off, zeros past the end.
func (l *logicalFile) readAt(p []byte, off int64) error {
	rest, err := l.each(p, off, func(i int, at int64, b []byte) error {
		f, err := l.file(i)
		if err != nil {
			return err
		}
		if l.crcs == nil {
			_, err = f.ReadAt(b, at)
		} else {
			var crc uint32
			if crc, err = crc32c.ReadAt(f, b, at); err == nil {
				l.crcs.addCRC(i, at, int64(len(b)), crc)
			}
		}
		if err != nil {
			return l.readErr(i, at+int64(len(b)), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	clear(rest)
	return nil
}

// piece reads the logical bytes [off, off+n) into buf[frameLen:] (buf from
// the session's pool). When they lie in one file the piece also carries
// their CRC32C, which the CRC tracker needed anyway.
func (l *logicalFile) piece(off int64, n int, buf []byte) (span, error) {
	p := buf[frameLen : frameLen+n]
	if i, in, ok := l.within(off, n); ok && l.crcs != nil {
		f, err := l.file(i)
		if err != nil {
			return span{}, err
		}
		crc, err := crc32c.ReadAt(f, p, in)
		if err != nil {
			return span{}, l.readErr(i, in+int64(n), err)
		}
		l.crcs.addCRC(i, in, int64(n), crc)
		return span{buf: buf[:frameLen+n], crc: crc, hasCRC: true}, nil
	}
	if err := l.readAt(p, off); err != nil {
		return span{}, err
	}
	return span{buf: buf[:frameLen+n]}, nil
}

// track feeds the logical bytes p at off to the CRC tracker only.
func (l *logicalFile) track(p []byte, off int64) {
	l.each(p, off, func(i int, at int64, b []byte) error {
		l.crcs.add(i, at, b)
		return nil
	})
}

// writeAt stores the logical bytes p at off. Bytes past the logical end are
// padding every encoder saw as zeros; anything else there means the rebuild
// computed garbage, so it is reported rather than dropped.
func (l *logicalFile) writeAt(p []byte, off int64) error {
	rest, err := l.each(p, off, func(i int, at int64, b []byte) error {
		f, err := l.file(i)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(b, at); err != nil {
			return fmt.Errorf("write %s: %w", l.shown[i], err)
		}
		if l.crcs != nil {
			l.crcs.add(i, at, b)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for j, b := range rest {
		if b != 0 {
			return fmt.Errorf("%w: rebuilt padding byte at logical offset %d is %#x, not zero", ErrCorrupt, off+int64(len(p)-len(rest)+j), b)
		}
	}
	return nil
}

// sync flushes written files (all of them, reopening closed ones).
func (l *logicalFile) sync() error {
	for i := range l.paths {
		f, err := l.file(i)
		if err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", l.shown[i], err)
		}
	}
	return nil
}

func (l *logicalFile) close() error {
	var first error
	for _, i := range l.order {
		if err := l.open[i].Close(); err != nil && first == nil {
			first = fmt.Errorf("close %s: %w", l.shown[i], err)
		}
	}
	l.open = make(map[int]*os.File)
	l.order = nil
	return first
}
