package jobtest

import (
	"sync"
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

// Mount records what the protocols tell the file system.
type Mount struct {
	job *Job

	mu        sync.Mutex
	appeared  []string
	restoring map[string]bool
}

// Appeared records that dataset r appeared.
func (m *Mount) Appeared(r cache.Route) {
	m.mu.Lock()
	m.appeared = append(m.appeared, r.Name)
	m.mu.Unlock()
	m.job.Changed()
}

// Restoring records that r is being restored until done.
func (m *Mount) Restoring(r cache.Route, wait time.Duration) (done func()) {
	m.mu.Lock()
	if m.restoring == nil {
		m.restoring = map[string]bool{}
	}
	m.restoring[r.Name] = true
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.restoring, r.Name)
		m.mu.Unlock()
	}
}

// Forget records nothing: the test mount has no kernel caches to drop.
func (m *Mount) Forget(r cache.Route) { m.job.Changed() }

// Appearances returns the datasets announced so far, in order.
func (m *Mount) Appearances() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.appeared...)
}
