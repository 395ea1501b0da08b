package fs

import (
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
)

// restoring tracks datasets being rebuilt or fetched into the cache. A lookup
// of one waits until it is in place rather than answering "no such file"
// (the application would start from an older checkpoint, or none) or
// showing a half-restored tree.
type restoring struct {
	mu      sync.Mutex
	entries map[string]*restoreEntry // by dataset name
}

type restoreEntry struct {
	route cache.Route
	wait  time.Duration
	done  chan struct{}
}

// Restoring marks dataset r as being restored. Until done is called, a
// lookup of it waits, at most wait, for it to arrive.
func (f *FS) Restoring(r cache.Route, wait time.Duration) (done func()) {
	e := &restoreEntry{route: r, wait: wait, done: make(chan struct{})}
	f.restore.mu.Lock()
	if f.restore.entries == nil {
		f.restore.entries = map[string]*restoreEntry{}
	}
	f.restore.entries[r.Name] = e
	f.restore.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.restore.mu.Lock()
			if f.restore.entries[r.Name] == e {
				delete(f.restore.entries, r.Name)
			}
			f.restore.mu.Unlock()
			close(e.done)
		})
	}
}

// awaitRestored blocks while the entry at mount path p (a child of the
// namespace directory at dir) belongs to a dataset being restored.
func (f *FS) awaitRestored(dir, p string) {
	f.restore.mu.Lock()
	var match *restoreEntry
	for _, e := range f.restore.entries {
		r := e.route
		switch {
		case r.Kind == cache.KindDir && r.Root == p:
			match = e
		case r.Kind == cache.KindFlat && r.Root == dir:
			if fr, err := f.router.Route(p, false); err == nil && fr.Name == r.Name {
				match = e
			}
		}
	}
	f.restore.mu.Unlock()
	if match == nil {
		return
	}
	select {
	case <-match.done:
	case <-time.After(match.wait):
		f.log.Warn("gave up waiting for a dataset being restored", "dataset", match.route.Name, "waited", match.wait)
	}
}
