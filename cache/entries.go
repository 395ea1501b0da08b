package cache

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/scrfs/scrfs/internal/beneath"
	"github.com/scrfs/scrfs/layout"
	"golang.org/x/sys/unix"
)

// While a dataset is written its names are job-wide (package names): a
// node looks up a name another node created and makes its own copy of it,
// and applies to its copies what the application did on other nodes. The
// store does those changes to its own files, beneath the dataset's
// directory, and reports each (EventEntry) so the mount drops what the
// kernel cached.

// Placeholder records that this node made file rel of writing dataset d
// only to show a name another node created, or opened it for writing after
// another node created it: it holds none of its bytes. Unless a writer
// here gives it bytes before the dataset completes, it is not this node's:
// completion removes it, so the node's share does not claim a file it
// never wrote.
func (d *Dataset) Placeholder(rel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.placeholders == nil {
		d.placeholders = map[string]bool{}
	}
	d.placeholders[rel] = true
}

// wroteLocked notes that a writer of rel here made it grow by grew bytes:
// a placeholder that holds bytes is this node's. d.mu must be held.
func (d *Dataset) wroteLocked(rel string, grew int64) {
	if grew > 0 {
		delete(d.placeholders, rel)
	}
}

// EntryRenamed moves what the dataset knows of entry from (whether it is
// a placeholder, how it was written) to to: the application renamed it
// here.
func (d *Dataset) EntryRenamed(from, to string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.renameWritesLocked(from, to)
	d.placeholders = renamedKeys(d.placeholders, from, to)
}

// renamedKeys returns m with path from, and the paths below it (a
// directory renamed), moved to to; what was at to and below it goes.
func renamedKeys[V any](m map[string]V, from, to string) map[string]V {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		if under(k, to) {
			continue
		}
		out[k] = v
	}
	for k, v := range m {
		if under(k, from) {
			delete(out, k)
			out[to+strings.TrimPrefix(k, from)] = v
		}
	}
	return out
}

// under reports whether path p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// removePlaceholders removes the placeholders of d that stayed empty, as
// d completes. Its state is not yet Complete: nothing else changes its
// files.
func (s *Store) removePlaceholders(d *Dataset) {
	d.mu.Lock()
	rels := d.placeholders
	d.placeholders = nil
	name := d.name
	d.mu.Unlock()
	for rel := range rels {
		removed := false
		err := s.entryOp(name, rel, func(dir int, base string) error {
			var st unix.Stat_t
			if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != 0 {
				return err // written after all, by a path this store did not see
			}
			removed = true
			return unix.Unlinkat(dir, base, 0)
		})
		switch {
		case err != nil && !errors.Is(err, os.ErrNotExist):
			s.log.Warn("remove a name this node only showed", "dataset", name, "path", rel, "err", err)
		case removed:
			// The mount forgets this node's empty copy: the dataset's
			// view shows the file its writer holds.
			s.report(Event{Kind: EventEntry, Info: d.Info(), Path: rel})
		}
	}
}

// RemoveEntry removes this node's copy of entry rel of writing dataset
// name (a directory only if it is empty here), because the application
// removed it on another node. A copy this node does not have is no error.
func (s *Store) RemoveEntry(name, rel string, dir bool) error {
	d, err := s.writing(name)
	if err != nil {
		return fmt.Errorf("remove %s/%s: %w", name, rel, err)
	}
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	err = s.entryOp(name, rel, func(fd int, base string) error { return unix.Unlinkat(fd, base, flags) })
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s/%s: %w", name, rel, err)
	}
	d.EntryRemoved(rel)
	s.report(Event{Kind: EventEntry, Info: d.Info(), Path: rel})
	return nil
}

// RenameEntry renames this node's copy of entry from of writing dataset
// name to to, because the application renamed it on another node; the
// directories above to are made here if this node has not shown them
// yet. A copy this node does not have is no error.
func (s *Store) RenameEntry(name, from, to string) error {
	d, err := s.writing(name)
	if err != nil {
		return fmt.Errorf("rename %s/%s: %w", name, from, err)
	}
	if err := s.mkdirAll(name, path.Dir(to)); err != nil {
		return fmt.Errorf("rename %s/%s to %s: %w", name, from, to, err)
	}
	err = s.entryOp(name, from, func(fromDir int, fromBase string) error {
		return s.entryOp(name, to, func(toDir int, toBase string) error {
			return unix.Renameat(fromDir, fromBase, toDir, toBase)
		})
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rename %s/%s to %s: %w", name, from, to, err)
	}
	d.EntryRenamed(from, to)
	info := d.Info()
	s.report(Event{Kind: EventEntry, Info: info, Path: from})
	s.report(Event{Kind: EventEntry, Info: info, Path: to})
	return nil
}

// writing returns the writing dataset called name.
func (s *Store) writing(name string) (*Dataset, error) {
	d := s.Get(name)
	if d == nil {
		return nil, ErrNotFound
	}
	if !d.Writable() {
		return nil, ErrReadOnly
	}
	return d, nil
}

// entryOp runs op on the directory that holds entry rel of dataset name,
// opened beneath the cache directory without following symlinks, and the
// entry's last component.
func (s *Store) entryOp(name, rel string, op func(dir int, base string) error) error {
	if err := layout.CheckDatasetName(name); err != nil {
		return err
	}
	parent := name
	if d := path.Dir(rel); d != "." {
		parent = name + "/" + d
	}
	fd, err := beneath.OpenDir(s.cache.Fd(), parent)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return op(fd, path.Base(rel))
}

// mkdirAll makes directory rel of dataset name and those above it that
// this node does not have yet, as the job showed them elsewhere.
func (s *Store) mkdirAll(name, rel string) error {
	if rel == "." || rel == "" {
		return nil
	}
	if err := s.mkdirAll(name, path.Dir(rel)); err != nil {
		return err
	}
	err := s.entryOp(name, rel, func(dir int, base string) error { return unix.Mkdirat(dir, base, startedMode) })
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	return err
}
