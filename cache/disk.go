package cache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/scrfs/scrfs/layout"
)

const metaDirName = layout.MetaDir

// usage is what a dataset directory holds, scrfs's own .scrfs excluded.
type usage struct{ files, bytes int64 }

// scanUsage counts regular files and their apparent sizes below dir. It is
// a walk of its own, beside the listing completion makes of a dataset (the
// record's file list, which encodes and flushes read instead of walking
// again): the cache counts datasets for its state, status and eviction as
// they complete, are recovered after a restart or adopted, whether or not
// the job ever records them, and it knows nothing of records.
func scanUsage(dir string) (usage, error) {
	var u usage
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && e.Name() == metaDirName && filepath.Dir(p) == dir {
			return filepath.SkipDir
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			u.files++
			u.bytes += info.Size()
		}
		return nil
	})
	return u, err
}

// checkEmptyDataset fails with ErrNotEmpty unless the dataset directory dir
// holds nothing but scrfs's own metadata (or is gone).
func checkEmptyDataset(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != metaDirName {
			return ErrNotEmpty
		}
	}
	return nil
}

// NamespaceDirs returns the plain directories of the mount (those that are
// not datasets) with their modes.
func (s *Store) NamespaceDirs() map[string]uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint32, len(s.ns))
	for p, m := range s.ns {
		out[p] = m
	}
	return out
}

// AddNamespaceDir records a plain directory the application created at
// mount-relative path p (or its new mode), so it survives a restart. It is
// refused when the state cannot be written: only the state remembers it.
func (s *Store) AddNamespaceDir(p string, mode uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.ns[p]
	s.ns[p] = mode
	if err := s.persistLocked(); err != nil {
		s.restoreNSLocked(p, old, had)
		return refusal("directory "+p, err)
	}
	return nil
}

// RemoveNamespaceDir forgets a plain directory; like AddNamespaceDir, it is
// refused when the state cannot be written.
func (s *Store) RemoveNamespaceDir(p string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.ns[p]
	delete(s.ns, p)
	if err := s.persistLocked(); err != nil {
		s.restoreNSLocked(p, old, had)
		return refusal("remove directory "+p, err)
	}
	return nil
}

// restoreNSLocked undoes a change of namespace directory p. s.mu must be
// held.
func (s *Store) restoreNSLocked(p string, mode uint32, had bool) {
	if had {
		s.ns[p] = mode
	} else {
		delete(s.ns, p)
	}
}
