package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/record"
)

// targetList is issue 13's target for listing a dataset on a node that
// wrote none of it against the node that wrote it.
const targetList = 2.0

// listFiles returns the files of the listed dataset: files spread over
// dirs directories, as dNNN/fNNNNN.
func listFiles(files, dirs int, size int64) map[string]int64 {
	out := make(map[string]int64, files)
	for i := range files {
		out[fmt.Sprintf("d%03d/f%05d", i%dirs, i)] = size
	}
	return out
}

// listStates are the states of the kernel's caches a listing is timed in.
var listStates = []string{"first", "warm", "cold"}

// listResult is the listing's rounds: per state, on the writer and on a
// node that wrote nothing of the dataset.
type listResult struct {
	entries       int
	writer, other map[string][]time.Duration
	// coldWhy says why cold listings were not measured ("" when they were).
	coldWhy string
	// recordBytes is the size of the dataset's record, which every node
	// holds and builds its view from.
	recordBytes int64
}

// list writes a dataset of -files files through one node's mount per round
// and walks it (readdir, then lstat of every entry, as ls -lR) on that
// node and on the next, which wrote nothing of it: first after completion
// (the kernel has never looked its entries up on the other node; the
// daemon builds its view of the record there), again (warm: entries and
// attributes in the kernel's caches), and after the kernel dropped its
// dentries and inodes (cold: echo 2 > /proc/sys/vm/drop_caches, root only).
// Which node goes first alternates.
func (b *bench) list(ctx context.Context, c *job.Cluster) (*listResult, error) {
	res := &listResult{entries: b.o.files + b.o.dirs, writer: map[string][]time.Duration{}, other: map[string][]time.Duration{}}
	files := listFiles(b.o.files, b.o.dirs, b.o.fileSize)
	nodes := len(c.Nodes)
	for r := 0; r <= b.o.rounds; r++ {
		w := c.Nodes[r%nodes]
		other := c.Nodes[(r+1)%nodes]
		ds := fmt.Sprintf("list.%d", r)
		t0 := time.Now()
		if err := b.write(filepath.Join(w.Mount, ds), files, "COMPLETE"); err != nil {
			return res, err
		}
		b.progress("list   %-8s node %d wrote %d files in %s", roundName(r), w.Index, b.o.files, fmtSec(time.Since(t0)))
		if err := settled(ctx, c, ds); err != nil {
			return res, err
		}
		st, err := os.Stat(filepath.Join(other.CacheDir(jobID), ds, ".scrfs", record.File))
		if err != nil {
			return res, err
		}
		res.recordBytes = st.Size()
		// The kernel of the writer's mount knows the entries it created:
		// drop them, so "first" is the first lookup on both nodes.
		if err := dropDentries(); err != nil {
			res.coldWhy = err.Error()
		}
		order := []*job.Node{w, other}
		if r%2 == 1 {
			order = []*job.Node{other, w}
		}
		for _, state := range listStates {
			if state == "cold" {
				if res.coldWhy != "" {
					break
				}
				if err := dropDentries(); err != nil {
					return res, err
				}
			}
			line := fmt.Sprintf("list   %-8s %-5s", roundName(r), state)
			for _, n := range order {
				d, err := walk(filepath.Join(n.Mount, ds), res.entries+1) // + COMPLETE
				if err != nil {
					return res, fmt.Errorf("node %d: %w", n.Index, err)
				}
				who, m := "writer", res.writer
				if n != w {
					who, m = "other", res.other
				}
				line += fmt.Sprintf("  %s (node %d) %s", who, n.Index, fmtSec(d))
				if r > 0 {
					m[state] = append(m[state], d)
				}
			}
			b.progress("%s", line)
		}
	}
	return res, nil
}

// walk lists the tree under root as ls -lR does (readdir of every
// directory, lstat of every entry) and returns the time it took; it fails
// unless it saw want entries.
func walk(root string, want int) (time.Duration, error) {
	t0 := time.Now()
	n, err := walkDir(root)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if n != want {
		return 0, fmt.Errorf("%s: %d entries, want %d", root, n, want)
	}
	return d, nil
}

func walkDir(dir string) (int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("readdir %s: %w", dir, err)
	}
	n := 0
	for _, name := range names {
		p := filepath.Join(dir, name)
		st, err := os.Lstat(p)
		if err != nil {
			return n, err
		}
		n++
		if st.IsDir() {
			k, err := walkDir(p)
			n += k
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// dropDentries makes the kernel forget the dentries and inodes it does
// not need (every FUSE mount's among them, which the daemons are told to
// forget): the next lookup of each goes to the daemon.
func dropDentries() error {
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		return fmt.Errorf("cannot drop the kernel's dentry cache (root only): %w", err)
	}
	return nil
}
