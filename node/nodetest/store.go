package nodetest

import (
	"time"

	"github.com/scrfs/scrfs/cache"
)

// Store is a node's cache store that wakes the job's waiters after every
// change a protocol makes through it.
type Store struct {
	*cache.Store
	job *Job
}

func (s *Store) SetState(name string, to cache.State, reason string) error {
	defer s.job.Changed()
	return s.Store.SetState(name, to, reason)
}

func (s *Store) Fail(name, reason string) error {
	defer s.job.Changed()
	return s.Store.Fail(name, reason)
}

func (s *Store) NoteFailed(r cache.Route, reason string) error {
	defer s.job.Changed()
	return s.Store.NoteFailed(r, reason)
}

func (s *Store) Drop(name, why string) error {
	defer s.job.Changed()
	return s.Store.Drop(name, why)
}

func (s *Store) Adopt(r cache.Route, st cache.State, staged string, seq uint64, completed time.Time) (*cache.Dataset, error) {
	defer s.job.Changed()
	return s.Store.Adopt(r, st, staged, seq, completed)
}

func (s *Store) SetRecord(name string, seq uint64, completed time.Time) error {
	defer s.job.Changed()
	return s.Store.SetRecord(name, seq, completed)
}

func (s *Store) SetFlush(name string, st cache.FlushStatus) error {
	defer s.job.Changed()
	return s.Store.SetFlush(name, st)
}

// Listen attaches l to the store's events, and wakes the job's waiters
// after each: a protocol's change reaches the store either way.
func (s *Store) Listen(l cache.Listener) {
	s.Store.Listen(func(e cache.Event) {
		defer s.job.Changed()
		l(e)
	})
}
