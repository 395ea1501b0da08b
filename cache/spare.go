package cache

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/scrfs/scrfs/layout"
)

// Spare redundancy files. A job's checkpoints are alike, so the redundancy
// file of the dataset evicted once checkpoint N is protected is about the
// size of the one N+1's encode writes next. Deleting it would free its
// pages only for the encode to allocate as many fresh ones; on tmpfs that
// allocation (and, on VMs that hand free memory back to their host, the
// first touch of it) costs two to five times more than overwriting pages a
// file already holds. So eviction sets the evicted dataset's redundancy
// files aside as spares, and the next encode takes one, renames it into
// place and overwrites it. Spares nobody claims within spareTTL are deleted,
// so they hold cache space only across the gap between eviction and the
// next encode, when checkpoints come at least that often: space the encode
// is about to use anyway.
const (
	spareTTL  = 2 * time.Minute
	maxSpares = 4
)

// spare is a redundancy file set aside for reuse.
type spare struct {
	path  string
	size  int64
	added time.Time
}

func (s *Store) spareDir() string {
	return filepath.Join(s.CacheDir(), metaDirName, "spare")
}

// setAsideSpares moves the redundancy files of the dataset directory dir,
// which is about to go to the trash, into the spare directory. It runs
// before the move to the trash, so emptyTrash cannot delete them first.
// Failures only cost the reuse. s.mu must be held.
func (s *Store) setAsideSpares(dir string) {
	meta := layout.DatasetMetaDir(dir)
	entries, err := os.ReadDir(meta)
	if err != nil || os.MkdirAll(s.spareDir(), 0o700) != nil {
		return
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if _, _, _, _, _, _, err := layout.ParseRedundancyFileName(e.Name()); err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil || info.Size() == 0 {
			continue
		}
		s.spareSeq++
		dst := filepath.Join(s.spareDir(), strconv.FormatUint(s.spareSeq, 10))
		if err := os.Rename(filepath.Join(meta, e.Name()), dst); err != nil {
			continue
		}
		s.spares = append(s.spares, spare{path: dst, size: info.Size(), added: time.Now()})
	}
	// Keep the newest few: they are the likeliest to match the next encode.
	for len(s.spares) > maxSpares {
		os.Remove(s.spares[0].path)
		s.spares = s.spares[1:]
	}
	if len(s.spares) > 0 && s.spareTimer == nil {
		s.spareTimer = time.AfterFunc(spareTTL, s.expireSpares)
	}
}

// TakeSpare hands the largest spare redundancy file to the caller, who may
// rename it and overwrite it, or delete it. It returns "" when there is none.
func (s *Store) TakeSpare() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.spares) == 0 {
		return ""
	}
	i := 0
	for j, sp := range s.spares {
		if sp.size > s.spares[i].size {
			i = j
		}
	}
	path := s.spares[i].path
	s.spares = slices.Delete(s.spares, i, i+1)
	s.metrics.reused.Inc()
	return path
}

// expireSpares deletes the spares older than spareTTL and rearms itself
// while younger ones remain.
func (s *Store) expireSpares() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spareTimer = nil
	now := time.Now()
	keep := s.spares[:0]
	for _, sp := range s.spares {
		if now.Sub(sp.added) >= spareTTL || s.closed {
			os.Remove(sp.path)
			continue
		}
		keep = append(keep, sp)
	}
	s.spares = keep
	if len(s.spares) > 0 {
		s.spareTimer = time.AfterFunc(spareTTL-now.Sub(s.spares[0].added), s.expireSpares)
	}
}
