package transfer

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/record"
)

// A file several members wrote (MPI-IO, parallel HDF5) is one file in the
// prefix, readable by any tool there: one node flushes it whole, the one
// whose writers' pieces hold most of it (record.View.FlushedBy), from a
// copy put together from every writer's part (Options.Assembler); the
// other writers leave it out of their parts. The manifest lists it once,
// with the CRC32C of the whole, and a fetch brings it back whole to one
// node, like any other file.

// assembledDirName is where, in a dataset's metadata directory, a flush
// puts together the files several members wrote.
const assembledDirName = "assembled"

// assembledDir is that directory of dataset ds.
func assembledDir(ds *cache.Dataset) string {
	return filepath.Join(layout.DatasetMetaDir(ds.Dir()), assembledDirName)
}

// shared is what a record says of the files several members wrote.
type shared struct {
	view  *record.View
	paths map[string]*record.Entry
}

// sharedFiles returns the files several members of rec wrote.
func sharedFiles(rec *record.Record) shared {
	v := record.NewView(rec, "") // every node alike
	s := shared{view: v, paths: map[string]*record.Entry{}}
	for _, e := range v.SharedEntries() {
		s.paths[e.Path] = e
	}
	return s
}

// withoutShared returns list without its parts of files several members
// wrote.
func withoutShared(list []files.Meta, s shared) []files.Meta {
	if len(s.paths) == 0 {
		return list
	}
	return slices.DeleteFunc(slices.Clone(list), func(m files.Meta) bool {
		return m.Type == files.Regular && s.paths[m.Path] != nil
	})
}

// flushedBy returns what the members held here flush of the files several
// members wrote: each such file as one, and the directories above it.
func (s shared) flushedBy(held []*record.Member) []files.Meta {
	var out []files.Meta
	dirs := map[string]bool{}
	for _, e := range s.view.SharedEntries() {
		by := s.view.FlushedBy(e)
		if !slices.ContainsFunc(held, func(m *record.Member) bool { return m.ID == by }) {
			continue
		}
		for d := path.Dir(e.Path); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			if de, ok := s.view.Lookup(d); ok {
				out = append(out, de.Meta)
			}
		}
		out = append(out, e.Meta)
	}
	slices.SortFunc(out, func(a, b files.Meta) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// assemble puts the files several members wrote that this node flushes
// (list, with their directories) together in a directory of ds's metadata
// directory, and returns it.
func (f *Flusher) assemble(ctx context.Context, ds *cache.Dataset, list []files.Meta) (string, error) {
	if f.o.Assembler == nil {
		return "", fmt.Errorf("flush %s: files several nodes wrote, and nothing to put them together", ds.Name())
	}
	dir := assembledDir(ds)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("flush %s: %w", ds.Name(), err)
	}
	for _, m := range list {
		p := filepath.Join(dir, filepath.FromSlash(m.Path))
		if m.Type == files.Dir {
			if err := os.MkdirAll(p, 0o700); err != nil {
				return "", fmt.Errorf("flush %s: %w", ds.Name(), err)
			}
			continue
		}
		if err := f.assembleFile(ctx, ds.Name(), m, p); err != nil {
			return "", fmt.Errorf("flush %s: %w", ds.Name(), err)
		}
	}
	return dir, nil
}

// assembleFile puts file m together at p.
func (f *Flusher) assembleFile(ctx context.Context, dataset string, m files.Meta, p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.o.Assembler.Assemble(ctx, dataset, m.Path, out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
