package netbound

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/scrfs/scrfs/internal/crc32c"
)

// Local is what an encode does to each node's cache besides the network:
// read the node's checkpoint once and write its redundancy file, fsynced.
// Run next to the Traffic (Runner.Run) it gives redbench's bound (c): all
// the bytes a scheme must move, by plain goroutines with nothing else to do.
type Local struct {
	dir         string
	Src, Dst    []string // per node: the checkpoint, the redundancy file
	read, wrote []int64  // per node
	ring        *XORRing // run by Procs as XOR's ring instead of independent streams
	checked     bool     // run by Procs with the checks of an encode: WithChecks
	// Stage is, per node, the staged copy a fetch writes (WithFetch): the
	// checkpoints (Src) are then on disk, and fetchAlone says whether the
	// fetch feeds the ring or nothing.
	Stage      []string
	fetchAlone bool
}

// NewLocal writes (untimed) a checkpoint file of read bytes for each of
// nodes nodes under dir, from buf; each node writes wrote bytes.
func NewLocal(dir string, nodes int, read, wrote int64, buf []byte) (*Local, error) {
	return NewLocalEach(dir, slices.Repeat([]int64{read}, nodes), slices.Repeat([]int64{wrote}, nodes), buf)
}

// NewLocalEach is NewLocal with every node's own byte counts: node q
// reads read[q] bytes of its file and writes wrote[q] into a new one.
func NewLocalEach(dir string, read, wrote []int64, buf []byte) (*Local, error) {
	if len(read) != len(wrote) {
		return nil, fmt.Errorf("local I/O of %d readers and %d writers", len(read), len(wrote))
	}
	l := &Local{dir: dir, read: read, wrote: wrote}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for q := range read {
		l.Src = append(l.Src, filepath.Join(dir, fmt.Sprintf("node%d.ckpt", q)))
		l.Dst = append(l.Dst, filepath.Join(dir, fmt.Sprintf("node%d.redset", q)))
		if err := WriteN(l.Src[q], read[q], buf, false); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// WithXORRing returns l run as an XORRing instead (redbench's (d)): the
// Traffic's bytes, the checkpoint's reads and the redundancy file's writes
// coupled as XOR's encode couples them, over copies of l's checkpoints
// (withCopies). Only Procs runs it.
func (l *Local) WithXORRing(r XORRing) (*Local, error) {
	c, err := l.withCopies(".xor")
	if err == nil {
		c.ring = &r
	}
	return c, err
}

// WithChecks returns l with the checks every encode of scrfs makes, and
// nothing of any scheme's algorithm (redbench's (c′)): the streams of
// (c), over copies of l's checkpoints (withCopies), with the CRC32C of
// every byte read and of every byte written. Only Procs runs it.
func (l *Local) WithChecks() (*Local, error) {
	c, err := l.withCopies(".checked")
	if err == nil {
		c.checked = true
	}
	return c, err
}

// WithFetch returns l's checkpoints fetched as a cold restart fetches
// them, from copies in the directory disk (written there now, untimed;
// the caller removes them), twice over: fed feeds XOR's ring r the bytes
// as they land (redbench's (f)), alone only fetches them, in the streams
// fed reads them in (f0). Procs drops the page cache before each of their
// runs, so the fetch reads the disk. Only Procs runs them.
func (l *Local) WithFetch(disk string, r XORRing) (fed, alone *Local, err error) {
	c := *l
	c.ring = &r
	c.Src, c.Stage = nil, nil
	for _, s := range l.Src {
		d := filepath.Join(disk, filepath.Base(s))
		if err := copyFile(s, d); err != nil {
			return nil, nil, err
		}
		c.Src = append(c.Src, d)
		c.Stage = append(c.Stage, s+".staged")
	}
	a := c
	a.fetchAlone = true
	return &c, &a, nil
}

// withCopies returns l reading copies of its checkpoints (their names
// with suffix added), which each node writes afresh before each run
// (untimed), as a daemon's encode reads a checkpoint just written; l's
// own stay as (c) reads them.
func (l *Local) withCopies(suffix string) (*Local, error) {
	c := *l
	c.Src = nil
	for _, s := range l.Src {
		c.Src = append(c.Src, s+suffix)
		if err := copyFile(s, s+suffix); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// rewrite replaces the file at path by a copy of itself: the same bytes
// in pages written just now.
func rewrite(path string) error {
	err := copyFile(path, path+".new")
	if err == nil {
		err = os.Rename(path+".new", path)
	}
	if err != nil {
		os.Remove(path + ".new")
		return fmt.Errorf("rewrite %s: %w", path, err)
	}
	return nil
}

// copyFile copies the file at from to a new file at to.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// jobs returns a reader and a writer per node, each given its own buffer.
func (l *Local) jobs() []func(buf []byte) error {
	var out []func([]byte) error
	for q := range l.Src {
		out = append(out,
			func(buf []byte) error { return ReadN(l.Src[q], l.read[q], buf) },
			func(buf []byte) error { return WriteN(l.Dst[q], l.wrote[q], buf, true) })
	}
	return out
}

// Clean removes the redundancy files, so the next run allocates fresh
// cache pages as the daemons do for each new dataset.
func (l *Local) Clean() {
	for _, p := range slices.Concat(l.Dst, l.Stage) {
		os.Remove(p)
	}
}

// Close removes everything.
func (l *Local) Close() error { return os.RemoveAll(l.dir) }

// WriteN creates path and writes n bytes of buf to it, len(buf) at a time,
// with an fsync at the end when sync is set (the daemons fsync redundancy
// files before renaming them into place).
func WriteN(path string, n int64, buf []byte, sync bool) error {
	return writeN(path, n, buf, sync, nil)
}

// writeN is WriteN, which with sum also takes the CRC32C of what it
// writes, onto *sum.
func writeN(path string, n int64, buf []byte, sync bool, sum *uint32) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	for left := n; left > 0; {
		b := buf[:min(left, int64(len(buf)))]
		if sum != nil {
			*sum = crc32c.Update(*sum, b)
		}
		w, err := f.Write(b)
		if err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		left -= int64(w)
	}
	if sync {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// ReadN reads the first n bytes of path, len(buf) at a time.
func ReadN(path string, n int64, buf []byte) error {
	return readN(path, n, buf, nil)
}

// readN is ReadN, which with sum also takes the CRC32C of what it reads,
// onto *sum.
func readN(path string, n int64, buf []byte, sum *uint32) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for left := n; left > 0; {
		r, err := f.Read(buf[:min(left, int64(len(buf)))])
		if err == io.EOF {
			return fmt.Errorf("read %s: %d bytes short", path, left)
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if sum != nil {
			*sum = crc32c.Update(*sum, buf[:r])
		}
		left -= int64(r)
	}
	return nil
}
