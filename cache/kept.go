package cache

import (
	"fmt"
	"time"

	"github.com/scrfs/scrfs/layout"
	"golang.org/x/sys/unix"
)

// Kept datasets. A recorded dataset that the job cannot rebuild now — it
// lost more members than its scheme tolerates, or they are away, as when
// a job restarts on fewer nodes — fails, but this node keeps what it holds
// of it: the members that are away may come back with their shares, and
// then the dataset is verified and served again (Revive). Nothing is
// deleted on a guess. A kept dataset is not served: it has left the
// datasets Get and Datasets return (the store reported it Removed), and
// only the stock-taking, which verifies it again, reads it (Kept). Its
// files stay in its directory, so that a restart finds them where they
// were; the state lists it apart. It does not count against the cache
// size, and goes only when space is needed — when the cache's file system
// could not take another dataset as large as the largest the cache holds
// (looked at whenever the cache evicts), or a writer got ENOSPC (NeedSpace)
// — oldest first, with a log line; or when a dataset of the same name is
// written, fetched or rebuilt here, which replaces it.

// Keep fails dataset name, a completed one, with reason and keeps its
// files (see above). A dataset still being written cannot be kept: its
// files never were a checkpoint, and it fails as Fail says. Keeping a
// kept dataset again updates its reason. When the state cannot be written
// the change is kept in memory: a restart takes stock again, which keeps
// it again.
func (s *Store) Keep(name, reason string) error {
	s.mu.Lock()
	if k := s.kept[name]; k != nil {
		k.mu.Lock()
		k.reason = reason
		k.mu.Unlock()
		s.persistLocked()
		s.mu.Unlock()
		return nil
	}
	d := s.datasets[name]
	if d == nil {
		s.mu.Unlock()
		return fmt.Errorf("keep %s: %w", name, ErrNotFound)
	}
	d.mu.Lock()
	if !d.state.Completed() {
		d.mu.Unlock()
		s.mu.Unlock()
		return s.Fail(name, reason)
	}
	d.mu.Unlock()
	info, evicted := s.setKeptLocked(d, true, Failed, reason)
	s.mu.Unlock()
	s.arrived(name)
	s.log.Warn("dataset failed; what this node holds of it is kept, not served, until its members return or the space is needed",
		"dataset", name, "reason", reason, "files", info.Files, "bytes", info.Bytes)
	s.metrics.removed(info)
	s.reportInfo(EventRemoved, info)
	s.removed(evicted)
	return nil
}

// Kept returns the kept datasets, oldest first.
func (s *Store) Kept() []*Dataset {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keptLocked()
}

func (s *Store) keptLocked() []*Dataset { return byCompletion(s.kept) }

// Revive serves kept dataset name again, in state to (a completed state)
// with reason: the stock-taking verified it, its members are back. It is
// reported Adopted, as files scrfs put in place. When the state cannot be
// written the change is kept in memory: a restart takes stock again.
func (s *Store) Revive(name string, to State, reason string) error {
	if !to.Completed() {
		return fmt.Errorf("revive %s: state %s is not a completed state", name, to)
	}
	s.mu.Lock()
	d := s.kept[name]
	if d == nil {
		s.mu.Unlock()
		return fmt.Errorf("revive %s: %w", name, ErrNotFound)
	}
	if s.datasets[name] != nil {
		s.mu.Unlock()
		return fmt.Errorf("revive %s: %w", name, ErrExists)
	}
	info, evicted := s.setKeptLocked(d, false, to, reason)
	s.mu.Unlock()
	s.log.Info("kept dataset verified again and served: the members it lacked are back", "dataset", name, "state", to.Shown())
	s.reportInfo(EventAdopted, info)
	s.removed(evicted)
	return nil
}

// setKeptLocked moves d between the datasets served and those kept (kept),
// in state st with reason, writes the state (kept in memory if it cannot
// be: a restart takes stock again) and applies the cache size. It returns
// d as it is now and what the cache size evicted. s.mu must be held.
func (s *Store) setKeptLocked(d *Dataset, kept bool, st State, reason string) (Info, []Info) {
	d.mu.Lock()
	d.state, d.reason, d.kept, d.removed = st, reason, kept, kept
	d.settleBy = time.Time{}
	info := d.infoLocked()
	d.mu.Unlock()
	from, to := s.datasets, s.kept
	if !kept {
		from, to = s.kept, s.datasets
	}
	delete(from, info.Name)
	to[info.Name] = d
	s.persistLocked()
	return info, s.evictLocked()
}

// replaceKeptLocked drops the kept dataset called name, if any, and
// forgets its failure, for a dataset of that name about to take its
// directory. s.mu must be held.
func (s *Store) replaceKeptLocked(name string) {
	s.forgetFailedLocked(name)
	if d := s.kept[name]; d != nil {
		s.dropKeptLocked(d, "a dataset of the same name takes its place")
	}
}

// dropKeptLocked moves kept dataset d to the trash. s.mu must be held.
func (s *Store) dropKeptLocked(d *Dataset, why string) Info {
	info := d.Info()
	delete(s.kept, info.Name)
	if err := s.toTrash(layout.DatasetDir(s.CacheDir(), info.Name), info.ID); err != nil {
		s.log.Error("remove a kept dataset from the cache", "dataset", info.Name, "err", err)
	}
	s.log.Warn("kept failed dataset removed", "dataset", info.Name, "why", why, "bytes", info.Bytes)
	return info
}

// evictKeptLocked evicts kept datasets, oldest first, while the cache's
// file system could not take another dataset as large as the largest the
// cache holds. s.mu must be held; the caller writes the state.
func (s *Store) evictKeptLocked() bool {
	if len(s.kept) == 0 {
		return false
	}
	var largest int64
	for _, d := range s.datasets {
		largest = max(largest, d.Info().Bytes)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.CacheDir(), &st); err != nil {
		return false
	}
	avail := int64(st.Bavail) * st.Bsize
	evicted := false
	for _, d := range s.keptLocked() {
		if avail >= largest {
			break
		}
		info := s.dropKeptLocked(d, fmt.Sprintf("the cache needs its space (%d bytes available, the largest dataset holds %d)", avail, largest))
		avail += info.Bytes
		evicted = true
	}
	if evicted {
		s.emptyTrashSoon()
	}
	return evicted
}

// Full reports whether the cache's file system has no block left for a
// writer (its writes fail with ENOSPC).
func (s *Store) Full() bool {
	var st unix.Statfs_t
	return unix.Statfs(s.CacheDir(), &st) == nil && st.Bavail == 0
}

// NeedSpace evicts the oldest kept dataset: a writer got ENOSPC. It
// reports whether it evicted one (its bytes are freed as the trash is
// emptied, at once: the cache is short of space).
func (s *Store) NeedSpace() bool {
	s.mu.Lock()
	kept := s.keptLocked()
	if len(kept) == 0 || s.closed {
		s.mu.Unlock()
		return false
	}
	s.dropKeptLocked(kept[0], "a writer got ENOSPC: the cache needs its space")
	s.persistLocked()
	s.mu.Unlock()
	s.emptyTrashSoon()
	return true
}
