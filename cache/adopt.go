package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/scrfs/scrfs/layout"
)

// StagingDir returns where scrfs itself assembles a dataset's files (a fetch
// from the prefix, say) before Adopt moves them into the cache in one
// rename. It is inside the cache directory, so the rename never copies, and
// hidden from the mount.
func (s *Store) StagingDir(name string) string {
	return filepath.Join(s.CacheDir(), metaDirName, "staging", name)
}

// Adopt takes a dataset whose files scrfs put in staged (usually
// StagingDir(r.Name)) into the cache under route r, in state st (a completed
// state), with its job-wide completion sequence number and time (seq 0:
// not recorded yet). It fails with ErrExists if a dataset of that name is in
// the cache. Like any completion it counts against the cache size, by its
// sequence, and is reported Adopted, not Completed (the caller decides what
// happens next). One adopted complete with a sequence is Recorded.
// It is refused with ErrControlFull, the files left in staged, when the
// state cannot be written: after a restart the cache would not know them.
func (s *Store) Adopt(r Route, st State, staged string, seq uint64, completed time.Time) (*Dataset, error) {
	if !st.Completed() {
		return nil, fmt.Errorf("adopt %s: state %s is not a completed state", r.Name, st)
	}
	if err := layout.CheckDatasetName(r.Name); err != nil {
		return nil, fmt.Errorf("adopt: %w", err)
	}
	if s.Get(r.Name) != nil {
		return nil, fmt.Errorf("adopt %s: %w", r.Name, ErrExists)
	}
	usage, err := scanUsage(staged)
	if err != nil {
		return nil, fmt.Errorf("adopt %s: %w", r.Name, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if s.datasets[r.Name] != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("adopt %s: %w", r.Name, ErrExists)
	}
	s.replaceKeptLocked(r.Name)
	dir := layout.DatasetDir(s.CacheDir(), r.Name)
	if err := os.Rename(staged, dir); err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("adopt %s: %w", r.Name, err)
	}
	d := s.newDatasetLocked(r)
	if completed.IsZero() {
		completed = time.Now()
	}
	d.began = "" // not written here
	d.state, d.completed, d.seq, d.files, d.bytes = withRecord(st, seq), completed, seq, usage.files, usage.bytes
	if err := s.persistLocked(); err != nil {
		delete(s.datasets, r.Name)
		if rerr := os.Rename(dir, staged); rerr != nil {
			s.log.Error("adopt refused, and its files could not be moved back", "dataset", r.Name, "dir", dir, "err", rerr)
		}
		s.mu.Unlock()
		return nil, refusal("adopt "+r.Name, err)
	}
	info := d.Info()
	evicted := s.evictLocked()
	s.mu.Unlock()
	s.log.Info("dataset adopted into cache", "dataset", r.Name, "state", info.State.Shown(), "files", usage.files, "bytes", usage.bytes)
	s.reportInfo(EventAdopted, info)
	s.removed(evicted)
	return d, nil
}

// Fetched tells the store that the job fetched dataset name from the
// prefix: every node adopted its share (node 0's fetch says so once they
// all did). It reports Fetched, so that the dataset is recorded again.
func (s *Store) Fetched(name string) {
	if d := s.Get(name); d != nil {
		s.reportInfo(EventFetched, d.Info())
	}
}

// Revised tells the store that dataset name's record was revised beside
// its files (a share moved to another node). It reports Revised.
func (s *Store) Revised(name string) {
	if d := s.Get(name); d != nil {
		s.reportInfo(EventRevised, d.Info())
	}
}

// ReserveIDs makes every dataset created from now on get an id of at least
// next. The prefix index orders datasets by id across allocations, so a new
// allocation continues from the largest id the index knows (and a restart
// reserves them again: kept in memory when the state cannot be written).
func (s *Store) ReserveIDs(next uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if next > s.nextID {
		s.nextID = next
		s.persistLocked()
	}
}
