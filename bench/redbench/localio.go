package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// localIO is what an encode does to each node's cache besides the network:
// read the node's checkpoint once and write its redundancy file, fsynced.
// Run next to the traffic (netBench.run) it gives bound (c), all the bytes
// the scheme must move, by plain goroutines with nothing else to do.
type localIO struct {
	dir         string
	src, dst    []string // per node: the checkpoint, the redundancy file
	read, wrote int64    // per node
}

// newLocalIO writes (untimed) a checkpoint file of read bytes for each of
// nodes nodes under dir, from buf.
func newLocalIO(dir string, nodes int, read, wrote int64, buf []byte) (*localIO, error) {
	l := &localIO{dir: dir, read: read, wrote: wrote}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for q := range nodes {
		l.src = append(l.src, filepath.Join(dir, fmt.Sprintf("node%d.ckpt", q)))
		l.dst = append(l.dst, filepath.Join(dir, fmt.Sprintf("node%d.redset", q)))
		if err := writeN(l.src[q], read, buf, false); err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

// jobs returns a reader and a writer per node, each given its own buffer.
func (l *localIO) jobs() []func(buf []byte) error {
	var out []func([]byte) error
	for q := range l.src {
		out = append(out,
			func(buf []byte) error { return readN(l.src[q], l.read, buf) },
			func(buf []byte) error { return writeN(l.dst[q], l.wrote, buf, true) })
	}
	return out
}

// clean removes the redundancy files, so the next run allocates fresh
// cache pages as the daemons do for each new dataset.
func (l *localIO) clean() {
	for _, p := range l.dst {
		os.Remove(p)
	}
}

// close removes everything.
func (l *localIO) close() error { return os.RemoveAll(l.dir) }

// writeN creates path and writes n bytes of buf to it, len(buf) at a time,
// with an fsync at the end when sync is set (the daemons fsync redundancy
// files before renaming them into place).
func writeN(path string, n int64, buf []byte, sync bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	for left := n; left > 0; {
		w, err := f.Write(buf[:min(left, int64(len(buf)))])
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

// readN reads the first n bytes of path, len(buf) at a time.
func readN(path string, n int64, buf []byte) error {
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
		left -= int64(r)
	}
	return nil
}
