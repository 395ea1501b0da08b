package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/atomicfile"
	"github.com/scrfs/scrfs/layout"
)

// While a dataset is written by several nodes, one file may be written on
// several of them (MPI-IO, parallel HDF5), each node's bytes landing in
// its own copy. For the file to be one once the dataset completes, each
// node must say which bytes of its copy it wrote (files.Meta's Ranges):
// the mount tells the dataset what each of its writers wrote through the
// daemon (Wrote), and which files were written past it, by the kernel
// directly (passthrough), which then count as written whole. The dataset
// keeps this until it completes, and then beside its files (RangesFile),
// since a daemon restarted between its completion and its record lists
// its share again; List applies it to the listing of the share.

// RangesFile is where a dataset's metadata directory keeps the byte ranges
// its writers wrote through the daemon, from its completion on.
const RangesFile = "ranges.json"

// writes is what a dataset knows of how its files were written here.
type writes struct {
	ranges   map[string]*files.Ranges // by path: bytes written through the daemon
	bypassed map[string]bool          // by path: written by the kernel directly
}

// Wrote records that a writer of file rel wrote ranges w through the
// daemon, and (bypassed) whether it may have written past it.
func (d *Dataset) Wrote(rel string, w *files.Ranges, bypassed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if bypassed {
		if d.writes.bypassed == nil {
			d.writes.bypassed = map[string]bool{}
		}
		d.writes.bypassed[rel] = true
	}
	if w == nil || w.Empty() {
		return
	}
	if d.writes.ranges == nil {
		d.writes.ranges = map[string]*files.Ranges{}
	}
	if d.writes.ranges[rel] == nil {
		d.writes.ranges[rel] = &files.Ranges{}
	}
	d.writes.ranges[rel].Union(w)
}

// Truncated records that file rel was cut (or grown) to size: what was
// written beyond it is gone.
func (d *Dataset) Truncated(rel string, size int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.writes.ranges[rel]; r != nil {
		r.Truncate(size)
	}
}

// EntryRemoved forgets what was written to file rel: it is gone.
func (d *Dataset) EntryRemoved(rel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.forgetWritesLocked(rel)
}

func (d *Dataset) forgetWritesLocked(rel string) {
	delete(d.writes.ranges, rel)
	delete(d.writes.bypassed, rel)
}

// renameWritesLocked moves what was written to from (and below it) to to,
// which it replaces. d.mu is held.
func (d *Dataset) renameWritesLocked(from, to string) {
	d.writes.ranges = renamedKeys(d.writes.ranges, from, to)
	d.writes.bypassed = renamedKeys(d.writes.bypassed, from, to)
}

// partialLocked returns the files of d known byte by byte: written only
// through the daemon, with what was written of each. d.mu is held.
func (d *Dataset) partialLocked() map[string][]files.Range {
	out := map[string][]files.Range{}
	for rel, r := range d.writes.ranges {
		if !d.writes.bypassed[rel] {
			out[rel] = r.List()
		}
	}
	return out
}

// saveRanges keeps, beside the files of dataset directory dir, the ranges
// its files known byte by byte were written in. Nothing is written when
// there are none.
func saveRanges(dir string, partial map[string][]files.Range) error {
	if len(partial) == 0 {
		return nil
	}
	b, err := json.Marshal(partial)
	if err != nil {
		return err
	}
	meta := layout.DatasetMetaDir(dir)
	if err := os.MkdirAll(meta, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(meta, RangesFile), b, 0o600)
}

// maxRangesFile bounds what loadRanges reads.
const maxRangesFile = 64 << 20

// loadRanges reads what saveRanges kept in dataset directory dir (nothing
// when it kept nothing).
func loadRanges(dir string) (map[string][]files.Range, error) {
	p := filepath.Join(layout.DatasetMetaDir(dir), RangesFile)
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out map[string][]files.Range
	dec := json.NewDecoder(io.LimitReader(f, maxRangesFile))
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return out, nil
}

// List lists this node's share of the complete dataset d (files.Scan),
// each file that was written here byte by byte through the daemon marked
// Partial with the ranges written: what the node tells the job it holds.
func (d *Dataset) List() ([]files.Meta, error) {
	dir := d.Dir()
	list, err := files.Scan(dir)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	partial := d.partialLocked()
	d.mu.Unlock()
	if len(partial) == 0 {
		// A daemon restarted since the dataset completed here.
		if partial, err = loadRanges(dir); err != nil {
			return nil, fmt.Errorf("list %s: %w", d.Name(), err)
		}
	}
	for i := range list {
		m := &list[i]
		rs, ok := partial[m.Path]
		if !ok || m.Type != files.Regular {
			continue
		}
		var clipped files.Ranges
		for _, r := range rs {
			clipped.Add(r.Off, min(r.End(), m.Size)-r.Off)
		}
		m.Partial, m.Ranges = true, clipped.List()
	}
	if err := files.Check(list); err != nil {
		return nil, fmt.Errorf("list %s: %w", d.Name(), err)
	}
	return list, nil
}
