package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// The restart as the application sees it (issue 25), on every node: from
// the daemons' start on a new allocation (caches wiped, the checkpoint in
// the prefix), each node's rank opens its own file through its mount as
// soon as the mount is there, reads one byte, then the rest. Beside it,
// cp -r of the same files from the prefix, then the same reads of the
// copies.

// readTimes is one restart's slowest rank: its first byte and its whole
// file read.
type readTimes struct{ first, all time.Duration }

// readThrough starts, on every node of c, its rank's read of its file of
// dataset ds through the node's mount, timed from t0; wait returns the
// slowest rank's times.
func (b *bench) readThrough(ctx context.Context, c *job.Cluster, ds string, t0 time.Time) (wait func() (readTimes, error)) {
	times := make([]readTimes, len(c.Nodes))
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for q, n := range c.Nodes {
		wg.Go(func() {
			times[q], errs[q] = readRank(ctx, n.Mount, filepath.Join(n.Mount, ds, fileName(q)), b.pay.rbufs[q], t0)
		})
	}
	return func() (readTimes, error) {
		wg.Wait()
		var slowest readTimes
		for _, t := range times {
			slowest.first, slowest.all = max(slowest.first, t.first), max(slowest.all, t.all)
		}
		return slowest, errors.Join(errs...)
	}
}

// readRank waits for mnt to be mounted (there is no event to wait for in
// another process's mount table: it polls), then reads path.
func readRank(ctx context.Context, mnt, path string, buf []byte, t0 time.Time) (readTimes, error) {
	for !job.Mounted(mnt) {
		if err := ctx.Err(); err != nil {
			return readTimes{}, fmt.Errorf("%s never mounted: %w", mnt, err)
		}
		time.Sleep(time.Millisecond)
	}
	f, err := os.Open(path)
	if err != nil {
		return readTimes{}, err
	}
	defer f.Close()
	var t readTimes
	if _, err := io.ReadFull(f, buf[:1]); err != nil {
		return t, fmt.Errorf("first byte of %s: %w", path, err)
	}
	t.first = time.Since(t0)
	if _, err := io.CopyBuffer(io.Discard, onlyReader{f}, buf); err != nil {
		return t, fmt.Errorf("read %s: %w", path, err)
	}
	t.all = time.Since(t0)
	return t, nil
}

// readCopies reads every regular file below dir, one reader per node as
// the ranks would, with the nodes' buffers.
func (b *bench) readCopies(dir string) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return err
	}); err != nil {
		return err
	}
	next := make(chan string)
	errs := make([]error, len(b.pay.rbufs))
	var wg sync.WaitGroup
	for q, buf := range b.pay.rbufs {
		wg.Go(func() {
			for p := range next {
				f, err := os.Open(p)
				if err == nil {
					_, err = io.CopyBuffer(io.Discard, onlyReader{f}, buf)
					f.Close()
				}
				errs[q] = errors.Join(errs[q], err)
			}
		})
	}
	for _, p := range paths {
		next <- p
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}
