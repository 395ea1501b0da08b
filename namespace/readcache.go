package namespace

import (
	"os"
	"path/filepath"
	"sync"
	"time"
)

// readCache keeps copies of other nodes' files, at most limit bytes,
// evicting the least recently used complete ones. A file being fetched
// holds its room from its first block on. A copy evicted while open stays
// readable through its open descriptors (it is only unlinked).
type readCache struct {
	dir   string
	limit int64

	mu    sync.Mutex
	files map[string]*cached // by path under dir
	used  int64
}

type cached struct {
	size    int64
	used    time.Time
	partial bool // being fetched: not at its path yet, not evictable
}

func newReadCache(dir string, limit int64) *readCache {
	return &readCache{dir: dir, limit: limit, files: map[string]*cached{}}
}

// path returns where the copy of member's file p of dataset lives.
func (rc *readCache) path(dataset, member, p string) string {
	return filepath.Join(rc.dir, dataset, member, filepath.FromSlash(p))
}

// get reports whether a complete copy is there, marking it used.
func (rc *readCache) get(path string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	c := rc.files[path]
	if c == nil || c.partial {
		return false
	}
	c.used = time.Now()
	return true
}

// reserve records room for a copy about to be fetched and evicts the
// least recently used complete copies beyond the limit.
func (rc *readCache) reserve(path string, size int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.files[path] = &cached{size: size, used: time.Now(), partial: true}
	rc.used += size
	for rc.used > rc.limit {
		victim, oldest := "", time.Time{}
		for p, c := range rc.files {
			if !c.partial && (victim == "" || c.used.Before(oldest)) {
				victim, oldest = p, c.used
			}
		}
		if victim == "" {
			return // only files being fetched: they go over the limit until done
		}
		rc.removeLocked(victim)
	}
}

// complete records that the copy reserved at path is there whole.
func (rc *readCache) complete(path string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if c := rc.files[path]; c != nil {
		c.partial, c.used = false, time.Now()
	}
}

// release gives back the room of a copy that was not completed.
func (rc *readCache) release(path string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if c := rc.files[path]; c != nil && c.partial {
		rc.used -= c.size
		delete(rc.files, path)
	}
}

func (rc *readCache) removeLocked(path string) {
	if c := rc.files[path]; c != nil && !c.partial {
		rc.used -= c.size
		delete(rc.files, path)
		os.Remove(path)
	}
}

// dropDataset removes every copy of a dataset's files.
func (rc *readCache) dropDataset(dataset string) {
	prefix := filepath.Join(rc.dir, dataset) + string(filepath.Separator)
	rc.mu.Lock()
	for p := range rc.files {
		if len(p) > len(prefix) && p[:len(prefix)] == prefix {
			rc.used -= rc.files[p].size
			delete(rc.files, p)
		}
	}
	rc.mu.Unlock()
	os.RemoveAll(filepath.Join(rc.dir, dataset))
}

// bytes returns what the read cache holds.
func (rc *readCache) bytes() int64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.used
}
