package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// restoring tracks datasets being rebuilt or fetched into the cache. The
// mount's lookup of one waits until it is in place rather than answering
// "no such file" (the application would start from an older checkpoint, or
// none) or showing a half-restored tree. The wait is on the store's own
// channels, bounded by what the restorer said it may take. Before all
// that, at a start, every lookup and listing waits until the job decided
// what it restores (Options.DecideWait).
type restoring struct {
	mu       sync.Mutex
	entries  map[string]*restoreEntry // by dataset name
	arriving map[string]*struct{}     // datasets node 0's restore fetches (Arriving), by name

	decided     chan struct{} // closed by Decided; nil: nothing to wait for
	decidedOnce sync.Once
	waitedOnce  sync.Once    // the log line of the first wait
	progressed  atomic.Int64 // unix nanoseconds of the last Progressing
}

// Progressing tells the store that the restore it waits for is making
// progress (a fetch copying bytes): the mount's wait for the decision is
// bounded by Options.DecideWait without progress, not in all, so that a
// checkpoint that takes longer to fetch is never hidden by a mount that
// stopped waiting for it.
func (s *Store) Progressing() {
	s.restore.progressed.Store(time.Now().UnixNano())
}

// Decided tells the store that the job decided which checkpoint it
// restores: lookups and listings no longer wait for it.
func (s *Store) Decided() {
	if s.restore.decided != nil {
		s.restore.decidedOnce.Do(func() { close(s.restore.decided) })
	}
}

// AwaitDecided blocks until the job decided what it restores (Decided),
// at most Options.DecideWait since the start of the wait or the last
// Progressing, or until ctx ends: then it returns ctx's error, and the
// caller must not answer as if the job had decided (an interrupted
// listing would show an empty mount).
func (s *Store) AwaitDecided(ctx context.Context) error {
	ch := s.restore.decided
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	default:
	}
	s.restore.waitedOnce.Do(func() {
		s.log.Info("the mount waits for the job to decide which checkpoint it restores", "at_most", s.opts.DecideWait)
	})
	t := time.NewTimer(s.opts.DecideWait)
	defer t.Stop()
	for {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			last := time.Unix(0, s.restore.progressed.Load())
			if left := s.opts.DecideWait - time.Since(last); left > 0 {
				t.Reset(left)
				continue
			}
			s.log.Warn("the job has not decided which checkpoint it restores: the mount shows what this node has",
				"waited_without_progress", s.opts.DecideWait)
			s.Decided()
			return nil
		}
	}
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
// ctx ends (the application's call was interrupted): then it returns ctx's
// error, as AwaitDecided does.
func (s *Store) AwaitRestored(ctx context.Context, dir, p string) error {
	if err := s.AwaitDecided(ctx); err != nil {
		return err
	}
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
		return nil
	}
	select {
	case <-match.done:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(match.wait):
		s.log.Warn("gave up waiting for a dataset being restored", "dataset", match.route.Name, "waited", match.wait)
	}
	return nil
}

// Arriving marks dataset name as arriving from the prefix: node 0's
// restore fetches it, and what the caches hold of it gives way to the
// fetched copy. Until the dataset settles here (Settled), fails, or done
// is called (the fetch did not commit), IsArriving reports it: the
// stock-taking passes it by, as a verdict on the copies being replaced,
// taken while the fetched one is recorded, would fail the checkpoint the
// job is restoring.
func (s *Store) Arriving(name string) (done func()) {
	mark := &struct{}{}
	s.restore.mu.Lock()
	if s.restore.arriving == nil {
		s.restore.arriving = map[string]*struct{}{}
	}
	s.restore.arriving[name] = mark
	s.restore.mu.Unlock()
	return func() {
		s.restore.mu.Lock()
		if s.restore.arriving[name] == mark {
			delete(s.restore.arriving, name)
		}
		s.restore.mu.Unlock()
	}
}

// IsArriving reports whether dataset name is arriving from the prefix
// (Arriving).
func (s *Store) IsArriving(name string) bool {
	s.restore.mu.Lock()
	defer s.restore.mu.Unlock()
	return s.restore.arriving[name] != nil
}

// arrived ends dataset name's arrival: it settled or failed here.
func (s *Store) arrived(name string) {
	s.restore.mu.Lock()
	delete(s.restore.arriving, name)
	s.restore.mu.Unlock()
}

// ArrivalChanged reports that the mount began or stopped showing dataset
// r, being fetched at the start, ahead of its bytes (an Arrival event).
func (s *Store) ArrivalChanged(r Route) {
	s.report(Event{Kind: EventArrival, Info: Info{Name: r.Name, Kind: r.Kind, Root: r.Root}})
}
