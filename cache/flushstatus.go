package cache

import (
	"fmt"
	"time"
)

// FlushState is where a dataset is on its way to the prefix directory.
type FlushState string

// Flush states. The zero value means no flush was asked for.
const (
	FlushScheduled FlushState = "scheduled" // waiting for its turn; survives a restart
	FlushRunning   FlushState = "flushing"
	FlushDone      FlushState = "flushed"
	FlushFailed    FlushState = "flush-failed"
)

// FlushStatus is a dataset's flush progress: the one flush state of scrfs,
// which the cache persists, transfer reports (with the copy rate) and the
// daemon turns into the control socket's JSON. Scheduled and running
// flushes hold the dataset against eviction.
type FlushStatus struct {
	State    FlushState `json:"state,omitempty"`
	Done     int64      `json:"done_bytes,omitempty"`
	Total    int64      `json:"total_bytes,omitempty"`
	Started  time.Time  `json:"started,omitzero"`
	Finished time.Time  `json:"finished,omitzero"`
	Error    string     `json:"error,omitempty"`
}

// pending reports a flush that must finish before the dataset may go.
func (f FlushStatus) pending() bool {
	return f.State == FlushScheduled || f.State == FlushRunning
}

// recovered is the status after a restart: a flush that was running is
// scheduled again (it is redone from the start).
func (f FlushStatus) recovered() FlushStatus {
	if f.State == FlushRunning {
		return FlushStatus{State: FlushScheduled}
	}
	return f
}

// SetFlush records dataset name's flush status. Only changes of State are
// persisted; progress updates stay in memory, and so does a change of State
// when the state cannot be written (flushes resume after a restart).
func (s *Store) SetFlush(name string, st FlushStatus) error {
	s.mu.Lock()
	d := s.datasets[name]
	if d == nil {
		s.mu.Unlock()
		return fmt.Errorf("flush status of %s: %w", name, ErrNotFound)
	}
	d.mu.Lock()
	changed := d.flush.State != st.State
	d.flush = st
	d.mu.Unlock()
	var evicted []Info
	if changed {
		s.persistLocked()
		if !st.pending() {
			evicted = s.evictLocked()
		}
	}
	s.mu.Unlock()
	s.removed(evicted)
	return nil
}
