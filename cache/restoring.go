package cache

import (
	"context"
	"sync"
	"time"
)

// restoring tracks datasets being rebuilt or fetched into the cache. The
// mount's lookup of one waits until it is in place rather than answering
// "no such file" (the application would start from an older checkpoint, or
// none) or showing a half-restored tree. The wait is on the store's own
// channels, bounded by what the restorer said it may take.
type restoring struct {
	mu      sync.Mutex
	entries map[string]*restoreEntry // by dataset name
}

type restoreEntry struct {
	route Route
	wait  time.Duration
	done  chan struct{}
}

// Restoring marks dataset r as being restored. Until done is called, a
// lookup of it waits, at most wait, for it to arrive.
func (s *Store) Restoring(r Route, wait time.Duration) (done func()) {
	e := &restoreEntry{route: r, wait: wait, done: make(chan struct{})}
	s.restore.mu.Lock()
	if s.restore.entries == nil {
		s.restore.entries = map[string]*restoreEntry{}
	}
	s.restore.entries[r.Name] = e
	s.restore.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.restore.mu.Lock()
			if s.restore.entries[r.Name] == e {
				delete(s.restore.entries, r.Name)
			}
			s.restore.mu.Unlock()
			close(e.done)
		})
	}
}

// AwaitRestored blocks while the entry at mount path p (a child of the
// namespace directory at dir) belongs to a dataset being restored, or until
// ctx ends (the application's call was interrupted).
func (s *Store) AwaitRestored(ctx context.Context, dir, p string) {
	s.restore.mu.Lock()
	var match *restoreEntry
	for _, e := range s.restore.entries {
		r := e.route
		switch {
		case r.Kind == KindDir && r.Root == p:
			match = e
		case r.Kind == KindFlat && r.Root == dir:
			if fr, err := s.opts.Router.Route(p, false); err == nil && fr.Name == r.Name {
				match = e
			}
		}
	}
	s.restore.mu.Unlock()
	if match == nil {
		return
	}
	select {
	case <-match.done:
	case <-ctx.Done():
	case <-time.After(match.wait):
		s.log.Warn("gave up waiting for a dataset being restored", "dataset", match.route.Name, "waited", match.wait)
	}
}
