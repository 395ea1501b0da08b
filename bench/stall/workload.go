package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// A workload is one checkpoint as an application writes it: every rank's
// part, then (after all ranks are done, as after a barrier) rank 0's
// finishing step, which is what a completion rule sees.
type workload struct {
	name   string
	marker string // the completion rule's marker (the daemons complete on it)
	// rank writes global rank g's part of dataset dir.
	rank func(w *writer, dir string, g int) error
	// finish runs on rank 0's node once every rank is done.
	finish func(w *writer, dir string) error
}

// writer holds what the ranks share: the sizes and one read-only buffer of
// payload per rank, allocated and touched once, so no timed write pays for
// the benchmark's own first touch of memory.
type writer struct {
	size       int64 // bytes per rank of the large file and of the DCP shard
	small      int   // small files per rank
	smallSize  int
	bufs       [][]byte // per global rank, 1 MiB each
	smallBytes []byte
}

// ioSize is the size of every write of the large files, as the issue's
// workload states (1 MiB writes).
const ioSize = 1 << 20

func newWriter(ranks int, size int64, small, smallSize int) *writer {
	w := &writer{size: size, small: small, smallSize: smallSize, smallBytes: make([]byte, smallSize)}
	for g := range ranks {
		b := make([]byte, ioSize)
		for i := range b {
			b[i] = byte(i*7 + g*13 + 1)
		}
		w.bufs = append(w.bufs, b)
	}
	for i := range w.smallBytes {
		w.smallBytes[i] = byte(i)
	}
	return w
}

// workloads are the three checkpoints of issue 16, by name.
var workloads = map[string]workload{
	// One file per rank, 1 MiB writes, fsync, then a COMPLETE marker.
	"large": {name: "large", marker: "COMPLETE",
		rank: func(w *writer, dir string, g int) error {
			return w.writeFile(filepath.Join(dir, fmt.Sprintf("rank_%d.bin", g)), w.size, w.bufs[g], true)
		},
		finish: func(w *writer, dir string) error {
			return w.writeFile(filepath.Join(dir, "COMPLETE"), 0, nil, false)
		}},
	// PyTorch DCP's FileSystemWriter: one shard per rank (__<rank>_0.distcp,
	// fsynced), then the coordinator writes .metadata.tmp, fsyncs it and
	// renames it to .metadata, which is the marker.
	"dcp": {name: "dcp", marker: ".metadata",
		rank: func(w *writer, dir string, g int) error {
			return w.writeFile(filepath.Join(dir, fmt.Sprintf("__%d_0.distcp", g)), w.size, w.bufs[g], true)
		},
		finish: func(w *writer, dir string) error {
			tmp := filepath.Join(dir, ".metadata.tmp")
			if err := w.writeFile(tmp, 64<<10, w.bufs[0][:64<<10], true); err != nil {
				return err
			}
			return os.Rename(tmp, filepath.Join(dir, ".metadata"))
		}},
	// Many small files per rank in its own directory, then COMPLETE.
	"small": {name: "small", marker: "COMPLETE",
		rank: func(w *writer, dir string, g int) error {
			sub := filepath.Join(dir, fmt.Sprintf("rank_%d", g))
			if err := os.Mkdir(sub, 0o755); err != nil {
				return err
			}
			for i := range w.small {
				if err := w.writeFile(filepath.Join(sub, fmt.Sprintf("f%d", i)), int64(w.smallSize), w.smallBytes, false); err != nil {
					return err
				}
			}
			return nil
		},
		finish: func(w *writer, dir string) error {
			return w.writeFile(filepath.Join(dir, "COMPLETE"), 0, nil, false)
		}},
}

// writeFile creates p and writes size bytes from buf (repeated), in
// len(buf) pieces, fsyncing before the close when sync is set.
func (w *writer) writeFile(p string, size int64, buf []byte, sync bool) error {
	fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_WRONLY|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	for left := size; left > 0; {
		n, err := syscall.Write(fd, buf[:min(left, int64(len(buf)))])
		if err != nil {
			syscall.Close(fd)
			return fmt.Errorf("write %s: %w", p, err)
		}
		left -= int64(n)
	}
	if sync {
		if err := syscall.Fsync(fd); err != nil {
			syscall.Close(fd)
			return fmt.Errorf("fsync %s: %w", p, err)
		}
	}
	if err := syscall.Close(fd); err != nil {
		return fmt.Errorf("close %s: %w", p, err)
	}
	return nil
}

// checkpoint writes dataset ds of workload wl as the whole job would: every
// rank of every node at once into roots[node]/ds, then rank 0's finish on
// node 0. It returns the stall: from the moment the ranks start (the first
// open) to the end of the finishing step (the last close or rename).
func (w *writer) checkpoint(wl workload, roots []string, ranksPerNode int, ds string) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(roots)*ranksPerNode)
	start := time.Now()
	for node, root := range roots {
		for r := range ranksPerNode {
			g := node*ranksPerNode + r
			wg.Add(1)
			go func() {
				defer wg.Done()
				dir := filepath.Join(root, ds)
				// Every rank makes the directory, as torch's makedirs(exist_ok=True) does.
				if err := os.MkdirAll(dir, 0o755); err != nil {
					errs[g] = err
					return
				}
				errs[g] = wl.rank(w, dir, g)
			}()
		}
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("rank %d: %w", g, err)
		}
	}
	if err := wl.finish(w, filepath.Join(roots[0], ds)); err != nil {
		return 0, fmt.Errorf("rank 0 finishing: %w", err)
	}
	return time.Since(start), nil
}

// settle writes as many bytes as one checkpoint of wl, with as many
// writers, into scratch files under dir and deletes them again. The VM this
// runs on hands free memory back to its host, and writing into such memory
// costs the host a fault per page (see bench/README.md): settling first
// makes every measured checkpoint, direct or through the mount, land on
// pages the host has just backed, so the comparison shows what the mount
// costs rather than where the guest's free memory happened to be.
func (w *writer) settle(dir string, wl workload, writers int) error {
	per := w.size
	if wl.name == "small" {
		per = int64(w.small) * int64(w.smallSize)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = w.writeFile(filepath.Join(dir, fmt.Sprint(g)), per, w.bufs[g], false)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
