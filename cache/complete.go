package cache

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/scrfs/scrfs/layout"
)

// maxFailures bounds the failed datasets remembered for status.
const maxFailures = 16

// finishCompletion moves d to Complete if its completion was requested and no
// file is open for writing. The file count is taken from the directory, not
// from the running tally, so the recorded numbers are exact. A completion
// whose state cannot be written does not happen (after a crash the dataset
// would come back as writing and fail, while the job counted on it): it
// waits, with its reason saying so, and the store completes it as soon as
// the state can be written.
func (s *Store) finishCompletion(d *Dataset) {
	d.mu.Lock()
	if d.state != Writing || d.completing == "" || d.writers > 0 || d.removed {
		d.mu.Unlock()
		return
	}
	dir := layout.DatasetDir(s.CacheDir(), d.name)
	d.mu.Unlock()

	s.removePlaceholders(d)
	usage, err := scanUsage(dir)
	d.mu.Lock()
	partial := d.partialLocked()
	d.mu.Unlock()
	if err := saveRanges(dir, partial); err != nil {
		// Kept in memory: only a restart before the record loses them,
		// and then the files count as written whole (never less).
		s.log.Warn("keep the ranges written of files several nodes write", "dataset", d.Name(), "err", err)
	}

	s.mu.Lock()
	d.mu.Lock()
	if d.state != Writing || d.completing == "" || d.writers > 0 || d.removed {
		// A writer opened (or the dataset went away) while we counted: its
		// close will try again.
		d.mu.Unlock()
		s.mu.Unlock()
		return
	}
	if err != nil {
		s.log.Warn("count dataset files", "dataset", d.name, "err", err)
	} else {
		d.files, d.bytes = usage.files, usage.bytes
	}
	d.state, d.completed, d.reason = Complete, time.Now(), ""
	info := d.infoLocked()
	d.mu.Unlock()
	if err := s.persistLocked(); err != nil {
		d.mu.Lock()
		d.state, d.completed = Writing, time.Time{}
		d.reason = "its completion waits until the cache state can be written: " + err.Error()
		d.mu.Unlock()
		s.mu.Unlock()
		return
	}
	evicted := s.evictLocked()
	s.mu.Unlock()

	s.metrics.completed(info)
	s.log.Info("dataset complete", "dataset", info.Name, "files", info.Files, "bytes", info.Bytes,
		"seconds", info.Completed.Sub(info.Created).Seconds(), "reason", info.Completing)
	s.reportInfo(EventCompleted, info)
	s.removed(evicted)
}

// SetRecord records what the job agreed about a completed dataset: its
// job-wide completion sequence number and time, which decide its age for
// eviction on every node alike. A dataset complete here becomes Recorded
// (its redundancy is applied next); one already past that keeps its state.
// The caller keeps the record itself with the dataset's files first, so
// when the state cannot be written the change is kept in memory: a
// restart reads the record again.
func (s *Store) SetRecord(name string, seq uint64, completed time.Time) error {
	s.mu.Lock()
	d := s.datasets[name]
	if d == nil {
		s.mu.Unlock()
		return fmt.Errorf("record %s: %w", name, ErrNotFound)
	}
	d.mu.Lock()
	if !d.state.Completed() {
		st := d.state
		d.mu.Unlock()
		s.mu.Unlock()
		return fmt.Errorf("record %s: the dataset is %s here, not complete", name, st)
	}
	d.seq, d.completed = seq, completed
	if d.state == Complete { // its redundancy is applied next
		d.state = Recorded
		d.settleBy = time.Now().Add(maxDeferral)
	}
	info := d.infoLocked()
	d.mu.Unlock()
	s.persistLocked()
	evicted := s.evictLocked()
	s.mu.Unlock()
	s.reportInfo(EventRecorded, info)
	s.removed(evicted)
	return nil
}

// SetState records the outcome of redundancy for a completed dataset
// (Protected or Degraded, with a reason for Degraded). When the state cannot
// be written the change is kept in memory: a restart takes stock again.
func (s *Store) SetState(name string, to State, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.datasets[name]
	if d == nil {
		return fmt.Errorf("set state of %s: %w", name, ErrNotFound)
	}
	d.mu.Lock()
	if !canMove(d.state, to) || to == Failed {
		from := d.state
		d.mu.Unlock()
		return &TransitionError{Dataset: name, From: from, To: to}
	}
	d.state, d.reason = to, reason
	d.mu.Unlock()
	s.persistLocked()
	return nil
}

// Fail marks dataset name failed with a reason and removes its files from the
// cache. The record stays visible in Failures. When the state cannot be
// written the failure is kept in memory: with its files gone, a restart
// reports the dataset failed too (its directory missing).
func (s *Store) Fail(name, reason string) error {
	s.mu.Lock()
	d := s.datasets[name]
	if d == nil {
		s.mu.Unlock()
		return fmt.Errorf("fail %s: %w", name, ErrNotFound)
	}
	info := s.dropLocked(d, Failed, reason)
	s.persistLocked()
	s.mu.Unlock()
	s.arrived(name)
	s.log.Warn("dataset failed", "dataset", name, "reason", reason)
	s.removed([]Info{info})
	return nil
}

// dropLocked takes d out of the cache: its directory goes to the trash (so a
// large dataset does not hold the lock while it is deleted) and it is
// forgotten, or remembered as failed. s.mu must be held.
func (s *Store) dropLocked(d *Dataset, final State, reason string) Info {
	d.mu.Lock()
	d.removed = true
	if d.idle != nil {
		d.idle.Stop()
	}
	if final == Failed {
		d.state, d.reason = Failed, reason
	}
	info := d.infoLocked()
	dir := layout.DatasetDir(s.CacheDir(), d.name)
	d.mu.Unlock()
	delete(s.datasets, info.Name)
	if final == Failed {
		s.rememberFailedLocked(info)
	}
	if err := s.toTrash(dir, info.ID); err != nil && !os.IsNotExist(err) {
		s.log.Error("remove dataset from cache", "dataset", info.Name, "err", err)
	}
	return info
}

// rememberFailedLocked keeps a failed dataset for status, the newest
// maxFailures, one entry per name (the latest). s.mu must be held.
func (s *Store) rememberFailedLocked(info Info) {
	s.forgetFailedLocked(info.Name)
	s.failed = append(s.failed, info)
	if len(s.failed) > maxFailures {
		s.failed = slices.Delete(s.failed, 0, len(s.failed)-maxFailures)
	}
}

// forgetFailedLocked forgets the failure of dataset name: it failed again,
// or a dataset of its name is here now (fetched, rebuilt, written again),
// and status must not show two rows of one name. s.mu must be held.
func (s *Store) forgetFailedLocked(name string) {
	s.failed = slices.DeleteFunc(s.failed, func(i Info) bool { return i.Name == name })
}

// evictLocked drops the oldest completed datasets beyond the cache size,
// skipping pinned ones (being encoded or flushed). Age is the job-wide
// completion order of the datasets' records, never this node's local
// order: a node that rebuilt or fetched datasets in another order evicts
// the same ones as every other node. A recorded dataset gives way only to
// newer recorded ones: a dataset complete here but not yet proven
// job-wide may still fail (a node lost its share), and must not cost a
// proven checkpoint its place — nor make this node evict what the others,
// which never completed it, keep; the cache holds one more until its
// record comes. Nor does a recorded one whose redundancy is still being
// applied (its record just came): it may still fail (a node could not
// keep its record, or lost its share since), and must not have cost an
// older, protected checkpoint its place; it counts once it settled.
// Datasets never recorded (a store without a job) give way to newer ones
// of their own. Nothing is evicted while the state cannot be
// written (a restart would report the datasets lost): the cache holds more
// until it can. s.mu must be held.
func (s *Store) evictLocked() []Info {
	var recorded, unrecorded []*Dataset
	for _, d := range s.sortedLocked() {
		switch {
		case !d.State().Completed():
		case d.isRecorded():
			recorded = append(recorded, d)
		default:
			unrecorded = append(unrecorded, d)
		}
	}
	// The newest CacheSize of each standing always stay; older ones go
	// unless pinned, in which case the cache holds one more for a while.
	now := time.Now()
	settled := func(d *Dataset) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return !now.Before(d.settleBy)
	}
	var victims []*Dataset
	for _, d := range slices.Concat(beyond(recorded, s.opts.CacheSize, settled),
		beyond(unrecorded, s.opts.CacheSize, func(*Dataset) bool { return true })) {
		d.mu.Lock()
		pinned := d.pins > 0 || d.flush.pending()
		d.mu.Unlock()
		if !pinned {
			victims = append(victims, d)
		}
	}
	if len(victims) == 0 {
		if s.evictKeptLocked() {
			s.persistLocked()
		}
		return nil
	}
	s.evictKeptLocked()
	// The state without them first, then their files.
	for _, d := range victims {
		delete(s.datasets, d.Name())
	}
	if err := s.persistLocked(); err != nil {
		for _, d := range victims {
			s.datasets[d.Name()] = d
		}
		return nil
	}
	var evicted []Info
	for _, d := range victims {
		evicted = append(evicted, s.dropLocked(d, "", ""))
	}
	return evicted
}

// beyond returns the datasets of ds (oldest first) older than the newest
// n for which counts holds.
func beyond(ds []*Dataset, n int, counts func(*Dataset) bool) []*Dataset {
	kept := 0
	for i := len(ds) - 1; i >= 0; i-- {
		if kept >= n {
			return ds[:i+1]
		}
		if counts(ds[i]) {
			kept++
		}
	}
	return nil
}

// evict applies the cache size after a pin is released, or a dataset
// settled.
func (s *Store) evict() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	evicted := s.evictLocked()
	s.mu.Unlock()
	s.removed(evicted)
}

func (s *Store) removed(infos []Info) {
	for _, info := range infos {
		if info.State != Failed {
			s.log.Info("dataset evicted", "dataset", info.Name, "bytes", info.Bytes, "cache_size", s.opts.CacheSize)
		}
		s.metrics.removed(info)
		s.reportInfo(EventRemoved, info)
	}
	if len(infos) > 0 {
		s.emptyTrashSoon()
	}
}

// Drop removes dataset name from the cache without recording a failure: the
// daemon discards it on purpose (restart.from_cache = false, or a corrupt
// copy about to be rebuilt). why is logged. When the state cannot be
// written the drop is kept in memory, like a failure.
func (s *Store) Drop(name, why string) error {
	s.mu.Lock()
	d := s.datasets[name]
	if d == nil {
		s.mu.Unlock()
		return fmt.Errorf("drop %s: %w", name, ErrNotFound)
	}
	info := s.dropLocked(d, "", "")
	s.persistLocked()
	s.mu.Unlock()
	s.log.Info("dataset dropped from cache", "dataset", name, "why", why)
	s.reportInfo(EventRemoved, info)
	s.emptyTrashSoon()
	return nil
}

// FailWriting fails every dataset an earlier run of the daemon left being
// written: after a restart they can never be completed (their writers are
// gone), and SCR only ever restarts from complete checkpoints. Datasets
// this run created are left alone: the job may start one on this node
// while it restores (another node began it), or the application through
// the mount, which is up by then.
func (s *Store) FailWriting(reason string) {
	for _, d := range s.Datasets() {
		if info := d.Info(); info.State == Writing && info.Began != s.opts.Incarnation {
			if err := s.Fail(d.Name(), reason); err != nil {
				s.log.Warn("fail incomplete dataset", "dataset", d.Name(), "err", err)
			}
		}
	}
}

// NoteFailed records that dataset r failed elsewhere in the job although
// this node holds none of it (a replacement learning that a checkpoint is
// lost), so every node's status tells the same story. When the state cannot
// be written the note is kept in memory: it only informs.
func (s *Store) NoteFailed(r Route, reason string) error {
	info := Info{Name: r.Name, Kind: r.Kind, Root: r.Root, State: Failed, Reason: reason, Created: time.Now()}
	s.mu.Lock()
	s.rememberFailedLocked(info)
	s.persistLocked()
	s.mu.Unlock()
	s.log.Warn("dataset failed", "dataset", r.Name, "reason", reason)
	s.metrics.removed(info)
	return nil
}

// isRecorded says whether the job agreed the dataset's record.
func (d *Dataset) isRecorded() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seq > 0
}

// byCompletion returns the datasets of m oldest first (compareCompletion),
// reading each one's state once.
func byCompletion(m map[string]*Dataset) []*Dataset {
	type entry struct {
		d    *Dataset
		info Info
	}
	es := make([]entry, 0, len(m))
	for _, d := range m {
		es = append(es, entry{d, d.Info()})
	}
	slices.SortFunc(es, func(a, b entry) int { return compareCompletion(a.info, b.info) })
	out := make([]*Dataset, len(es))
	for i, e := range es {
		out[i] = e.d
	}
	return out
}
