package cache

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// The control directory usually sits on a small file system that other
// jobs share (/dev/shm by default), and any of them can fill it. A store
// that cannot write state.json must not stop the daemon: it has every
// completed dataset on disk and in memory, and the application may need
// them. So the store goes read-only instead, and every change is one of
// two kinds:
//
//   - kept in memory, because a restart would reconstruct the same result
//     without the state file: a dataset that fails or is dropped (its files
//     are gone, so a restart reports it failed), a redundancy verdict (a
//     restart takes stock again), a dataset's record (the record is kept
//     with its files, and the daemon reads it back at start), flush
//     progress (flushes resume from the prefix), a rename of a dataset
//     still being written (at a restart it fails either way);
//   - refused, with ErrControlFull, because a restart could not: a new
//     dataset, an eviction (it would come back as a loss), an adoption of
//     rebuilt or fetched files, a namespace directory, and a completion —
//     which waits, since its files are safe and it can complete as soon as
//     the state can be written.
//
// Every change tries to write the state again, and so does a timer every
// retryEvery; the first write that succeeds ends the read-only condition,
// writes what was kept in memory, and lets waiting completions and
// evictions go on.

// retryEvery is how often a read-only store tries to write its state when
// nothing else changes.
const retryEvery = 2 * time.Second

// remindEvery bounds the log lines of a long read-only spell: one when it
// starts, one when it ends, and a reminder at most this often between.
const remindEvery = 10 * time.Minute

// ReadOnlyReasons are the values of ReadOnly.Reason: why the last write of
// the state failed (and the reason label of scrfs_cache_read_only).
var ReadOnlyReasons = []string{"no_space", "quota", "read_only_fs", "error"}

// ReadOnly describes a store that cannot write its state.
type ReadOnly struct {
	Since    time.Time // the first failed write
	Reason   string    // one of ReadOnlyReasons
	Err      error     // the last failed write
	Failures int       // failed writes since Since
}

// readOnlyState is the store's read-only condition; the zero value is a
// writable store. Store.mu protects it.
type readOnlyState struct {
	ReadOnly
	reminded time.Time // last log line about it
}

func (r *readOnlyState) active() bool { return !r.Since.IsZero() }

// ReadOnly reports whether the store is read-only, and why.
func (s *Store) ReadOnly() (ReadOnly, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ro.ReadOnly, s.ro.active()
}

// reasonOf names the cause of a failed write.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "no_space"
	case errors.Is(err, syscall.EDQUOT):
		return "quota"
	case errors.Is(err, syscall.EROFS):
		return "read_only_fs"
	}
	return "error"
}

// noteWriteLocked enters or leaves the read-only condition after a write of
// the state, logging each change once (and a reminder at most every
// remindEvery). s.mu must be held.
func (s *Store) noteWriteLocked(err error) {
	now := time.Now()
	ro := &s.ro
	switch {
	case err == nil && ro.active():
		s.log.Info("cache state written again: leaving read-only; new datasets are accepted",
			"control", s.control.Path(), "read_only_seconds", now.Sub(ro.Since).Seconds(), "failed_writes", ro.Failures)
		*ro = readOnlyState{}
		// Completions and evictions that waited go on, off this lock.
		select {
		case s.writable <- struct{}{}:
		default:
		}
	case err == nil:
	case !ro.active():
		*ro = readOnlyState{ReadOnly: ReadOnly{Since: now, Reason: reasonOf(err), Err: err, Failures: 1}, reminded: now}
		s.log.Error("cannot write the cache state: read-only until it can; completed datasets are served, new ones refused (ENOSPC)",
			"control", s.control.Path(), "reason", ro.Reason, "err", err,
			"fix", "free space (or quota) on the control directory's file system; scrfs retries every "+retryEvery.String())
	default:
		ro.Reason, ro.Err = reasonOf(err), err
		ro.Failures++
		if now.Sub(ro.reminded) >= remindEvery {
			ro.reminded = now
			s.log.Warn("cache still read-only: its state cannot be written", "control", s.control.Path(),
				"since", ro.Since, "failed_writes", ro.Failures, "err", err)
		}
	}
}

// refusal is the error of a change refused because the state could not be
// written: ErrControlFull, with the write's own error in the text only (so
// that the errno callers see is ENOSPC whatever the cause).
func refusal(what string, err error) error {
	return fmt.Errorf("%s: %w (%v)", what, ErrControlFull, err)
}

// controlWriteFailed hears of a failed write in the control directory. For
// another file than the state (node 0's ledger, the flush state) the store
// writes its own at once, so that a full file system shows as read-only
// whichever writer hits it first.
func (s *Store) controlWriteFailed(name string, err error) {
	if name == stateName {
		return
	}
	select {
	case s.probe <- struct{}{}:
	default:
	}
}

// retry writes the state every retryEvery while the store is read-only,
// and at once when another write in the control directory failed; it
// resumes what waited once any write succeeded. It runs until Close.
func (s *Store) retry() {
	defer close(s.retried)
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.writable:
			s.resume()
		case <-s.probe:
			s.mu.Lock()
			if !s.closed {
				s.persistLocked()
			}
			s.mu.Unlock()
		case <-tick.C:
			s.mu.Lock()
			if s.ro.active() && !s.closed {
				s.persistLocked()
			}
			s.mu.Unlock()
		}
	}
}

// resume completes the datasets whose completion waited for a writable
// state, and applies the cache size.
func (s *Store) resume() {
	for _, d := range s.Datasets() {
		s.finishCompletion(d)
	}
	s.evict()
}
