package cache

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/layout"
)

// Rules are the completion rules of datasets.complete, in the form the store
// applies them. `scrfs complete NAME` (RequestComplete) always works.
type Rules struct {
	Next     bool          // a newer dataset starting completes older writing ones
	Rename   bool          // renaming a dataset completes it under its new name
	Pointer  bool          // any pointer file changing completes the writing datasets (node 0 hears it)
	Pointers []string      // … or one of these
	Markers  []string      // a file of this name at the dataset's top, once closed
	Idle     time.Duration // no file open for writing for this long; 0 = off
}

// Options configure a Store.
type Options struct {
	// CacheDir and ControlDir are <cache_base>/<user>/scrfs.<job> and
	// <control_base>/<user>/scrfs.<job>. Open creates or verifies them (see
	// package jobdir): other users of the node must not be able to plant
	// or swap anything in them. They may be the same directory.
	CacheDir   jobdir.Path
	ControlDir jobdir.Path
	CacheSize  int // completed datasets kept; older ones are evicted
	Router     *Router
	Rules      Rules
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: no metrics

	// Incarnation names this daemon's run; every dataset created records
	// the run that created it (Info.Began).
	Incarnation string

	// DecideWait, when set, makes the mount's lookups and listings at a
	// start wait, at most this long, until the job decided which
	// checkpoint it restores (Decided): an application that looks for
	// its newest checkpoint must not find none meanwhile.
	DecideWait time.Duration

	// emptied, for tests, hears of each pass of the emptier and how long
	// deletes then wait (0: the trash is empty).
	emptied func(wait time.Duration)
}

// Store is the node-local cache of datasets. Its methods are safe for
// concurrent use.
type Store struct {
	opts    Options
	log     *slog.Logger
	idle    time.Duration
	cache   *jobdir.Dir // the verified cache directory, held open
	control *jobdir.Dir // the verified control directory, held open
	lock    *os.File
	metrics *metrics

	// mu protects the fields below and serialises writes of the state file.
	mu       sync.Mutex
	datasets map[string]*Dataset
	kept     map[string]*Dataset // failed datasets whose files are kept (kept.go)
	failed   []Info              // recent failures, newest last, for status
	nextID   uint64
	nodeID   string            // this cache's identity, made once and kept in the state
	ns       map[string]uint32 // namespace directories (mount-relative path → mode)
	pointers pointers          // the files at the mount root (pointers.go)
	closed   bool

	restore restoring // datasets being restored: lookups wait for them

	listenMu  sync.Mutex
	listeners []Listener // see Listen

	spares     []spare // oldest first
	spareSeq   uint64
	spareTimer *time.Timer // expires spares; nil when none wait
	ro         readOnlyState

	writable chan struct{} // a write succeeded after read-only: resume (buffered, 1)
	probe    chan struct{} // another file of the control directory failed to write (buffered, 1)
	stop     chan struct{} // closed by Close: retry and the emptier end
	retried  chan struct{} // closed when retry has ended

	trashWake chan struct{} // something went to the trash, or deletes may go on (buffered, 1)
	emptied   chan struct{} // closed when the emptier has ended
}

// Open claims the control directory, loads the persisted state, reconciles it
// with what is in the cache directory and returns the store. A dataset that
// was complete before a crash is complete again; one that was being written
// comes back as writing (never as complete). Learning what the cache holds
// needs no free space: a store whose state cannot be written opens
// read-only (see ReadOnly).
func Open(opts Options) (*Store, error) {
	if opts.CacheSize < 1 {
		return nil, fmt.Errorf("cache: cache size %d: must be at least 1", opts.CacheSize)
	}
	if opts.Router == nil {
		return nil, fmt.Errorf("cache: no dataset router")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		opts:     opts,
		log:      opts.Logger,
		idle:     opts.Rules.Idle,
		datasets: make(map[string]*Dataset),
		kept:     make(map[string]*Dataset),
		ns:       make(map[string]uint32),
		pointers: pointers{},
		nextID:   1,
		writable: make(chan struct{}, 1),
		probe:    make(chan struct{}, 1),
		stop:     make(chan struct{}),
		retried:  make(chan struct{}),

		trashWake: make(chan struct{}, 1),
		emptied:   make(chan struct{}),
	}
	if opts.DecideWait > 0 {
		s.restore.decided = make(chan struct{})
	}
	if err := s.openDirs(); err != nil {
		return nil, err
	}
	if err := s.recover(); err != nil {
		s.closeDirs()
		return nil, err
	}
	// A fetch or rebuild killed halfway left a staging directory; it is
	// redone from the start.
	os.RemoveAll(filepath.Join(s.CacheDir(), metaDirName, "staging"))
	// Spares are only worth keeping across the moment between an eviction
	// and the next encode; a restart starts without them.
	os.RemoveAll(s.spareDir())
	s.metrics = newMetrics(s, opts.Registerer)
	go s.emptier()
	go s.retry()
	// A daemon killed between a dataset's settling and the eviction it
	// made due leaves one more than the cache size: it goes now, as it
	// went on the other nodes.
	s.evict()
	return s, nil
}

// Close stops timers and releases the control directory. Datasets stay on
// disk with their persisted state.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.spareTimer != nil {
		s.spareTimer.Stop()
	}
	for _, d := range s.datasets {
		d.mu.Lock()
		if d.idle != nil {
			d.idle.Stop()
		}
		d.mu.Unlock()
	}
	s.mu.Unlock()
	close(s.stop)
	<-s.retried
	<-s.emptied
	s.metrics.unregister()
	return s.closeDirs()
}

// NodeID returns this cache's identity: made at random when the cache was
// created, kept across restarts, gone when the cache is wiped. Records of
// completed datasets name their members by it.
func (s *Store) NodeID() string { return s.nodeID }

// Router returns the store's dataset router.
func (s *Store) Router() *Router { return s.opts.Router }

// CacheDir returns the job's cache directory.
func (s *Store) CacheDir() string { return s.cache.Path() }

// ControlDir returns the job's verified control directory, for the other
// files kept there (the control socket, the flush state). It stays open
// until Close.
func (s *Store) ControlDir() *jobdir.Dir { return s.control }

// Get returns the dataset called name, or nil.
func (s *Store) Get(name string) *Dataset {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.datasets[name]
}

// Datasets returns every dataset in the cache, oldest first: recorded
// ones in the job's completion order (compareCompletion), then the others
// in this node's creation order. A node that rebuilt or fetched datasets
// (newest first) lists them as every other node does.
func (s *Store) Datasets() []*Dataset {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedLocked()
}

// CacheSize returns how many completed datasets the store keeps
// (datasets.cache_size).
func (s *Store) CacheSize() int { return s.opts.CacheSize }

// Failures returns the most recent failed datasets, oldest first, then
// the kept ones (Info.Kept), oldest first.
func (s *Store) Failures() []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.failed)
	for _, d := range s.keptLocked() {
		out = append(out, d.Info())
	}
	return out
}

func (s *Store) sortedLocked() []*Dataset { return byCompletion(s.datasets) }

func cmpID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Writing returns the writing dataset r names, or nil when there is none
// yet and one may be started here: the caller then tells the job (node 0
// must know when every dataset began, to judge later whether a node that
// shows nothing of it wrote nothing) and creates it with Obtain. An error
// says why r cannot be written here: its name is not a dataset's, it is
// complete or anchored elsewhere, or the store is read-only (refused before
// the job hears of it).
func (s *Store) Writing(r Route) (*Dataset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writingLocked(r)
}

// Obtain returns the writing dataset r names, creating it (and its cache
// directory) when it does not exist. created reports a new dataset. With the
// "next" rule, creating a dataset requests completion of every older dataset
// still being written.
func (s *Store) Obtain(r Route) (d *Dataset, created bool, err error) {
	s.mu.Lock()
	if d, err := s.writingLocked(r); d != nil || err != nil {
		s.mu.Unlock()
		return d, false, err
	}
	return s.createLocked(r, false)
}

// writingLocked is Writing with s.mu held.
func (s *Store) writingLocked(r Route) (*Dataset, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if d := s.datasets[r.Name]; d != nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		switch {
		case d.route != r:
			return nil, fmt.Errorf("dataset %s is anchored at %q, not %q: %w", r.Name, d.route.Root, r.Root, ErrExists)
		case d.state != Writing:
			return nil, fmt.Errorf("dataset %s: %w", r.Name, ErrReadOnly)
		}
		return d, nil
	}
	if err := layout.CheckDatasetName(r.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDataset, err)
	}
	if s.ro.active() {
		// Refused before the job hears of it, unless the state can be
		// written again by now.
		if err := s.persistLocked(); err != nil {
			return nil, s.refuseStartLocked(r, err)
		}
	}
	return nil, nil
}

// Started creates writing dataset r because the job started it on another
// node (every node shows every dataset directory); a dataset of that name
// already here is returned as it is.
func (s *Store) Started(r Route) (*Dataset, error) {
	if err := layout.CheckRoute(r.Name, string(r.Kind), r.Root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDataset, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if d := s.datasets[r.Name]; d != nil {
		s.mu.Unlock()
		return d, nil
	}
	d, _, err := s.createLocked(r, true)
	return d, err
}

// startedMode is the mode of the directory of a dataset another node
// started: as mkdir(2) with the usual umask makes it; the creator's own
// mode is not known here.
const startedMode = 0o755

// createLocked creates writing dataset r, here by the application or, with
// byJob, because another node started it, and unlocks s.mu.
func (s *Store) createLocked(r Route, byJob bool) (*Dataset, bool, error) {
	s.replaceKeptLocked(r.Name)
	d := s.newDatasetLocked(r)
	// State first, then the directory: a crash in between leaves a state
	// entry whose directory recover() recreates, never an orphan.
	if err := s.persistLocked(); err != nil {
		delete(s.datasets, r.Name)
		err = s.refuseStartLocked(r, err)
		s.mu.Unlock()
		return nil, false, err
	}
	if err := s.cache.Mkdir(r.Name, 0o700); err != nil && !os.IsExist(err) {
		delete(s.datasets, r.Name)
		s.persistLocked()
		s.mu.Unlock()
		return nil, false, fmt.Errorf("create dataset %s: %w", r.Name, err)
	}
	// The application's own mkdir sets its mode (fs); one another node
	// started gets the usual one, whatever the daemon's umask.
	if byJob {
		if err := s.cache.Chmod(r.Name, startedMode); err != nil {
			s.log.Warn("mode of a dataset directory another node started", "dataset", r.Name, "err", err)
		}
	}
	var older []*Dataset
	if s.opts.Rules.Next {
		for _, o := range s.datasets {
			if o != d && o.id < d.id {
				older = append(older, o)
			}
		}
	}
	s.mu.Unlock()
	s.log.Info("dataset started", "dataset", r.Name, "kind", r.Kind, "root", r.Root, "id", d.id, "by_job", byJob)
	s.report(Event{Kind: EventStarted, Info: d.Info(), ByJob: byJob})
	for _, o := range older {
		s.ruleFired(o, "next dataset "+r.Name+" started")
	}
	return d, true, nil
}

// refuseStartLocked refuses dataset r because the state could not be
// written (err), and remembers it here as failed: the job may have begun it
// on other nodes, and this node, which can hold none of it, must not vouch
// for an empty share of it. s.mu must be held.
func (s *Store) refuseStartLocked(r Route, err error) error {
	reason := "could not be started on this node: its cache was read-only (" + err.Error() + ")"
	if !slices.ContainsFunc(s.failed, func(i Info) bool { return i.Name == r.Name && i.Reason == reason }) {
		s.rememberFailedLocked(Info{Name: r.Name, Kind: r.Kind, Root: r.Root, State: Failed, Reason: reason, Created: time.Now()})
		s.log.Warn("dataset refused: the cache is read-only", "dataset", r.Name, "err", err)
	}
	return refusal("start dataset "+r.Name, err)
}

func (s *Store) newDatasetLocked(r Route) *Dataset {
	d := &Dataset{store: s, id: s.nextID, name: r.Name, route: r, state: Writing, created: time.Now(),
		began: s.opts.Incarnation}
	s.nextID++
	s.datasets[r.Name] = d
	return d
}

// Rename moves a writing dataset to a new route (the application renamed
// its directory here, once the job agreed). With the "rename" rule the
// dataset then completes.
func (s *Store) Rename(d *Dataset, to Route) error {
	return s.rename(d, to, false)
}

// Renamed moves this node's copy of writing dataset from to route to,
// because the application renamed it on another node (the job renames
// every copy). No completion rule fires here: the node where it was
// renamed tells the job. A dataset this node does not hold is no error.
func (s *Store) Renamed(from string, to Route) error {
	d := s.Get(from)
	if d == nil {
		return nil
	}
	return s.rename(d, to, true)
}

func (s *Store) rename(d *Dataset, to Route, byJob bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if o := s.datasets[to.Name]; o != nil && o != d {
		s.mu.Unlock()
		return fmt.Errorf("rename to %s: %w", to.Name, ErrExists)
	}
	d.mu.Lock()
	if d.state != Writing {
		d.mu.Unlock()
		s.mu.Unlock()
		return fmt.Errorf("rename dataset %s: %w", d.name, ErrReadOnly)
	}
	from := d.name
	if from != to.Name {
		s.replaceKeptLocked(to.Name)
		if err := s.cache.Rename(from, to.Name); err != nil {
			d.mu.Unlock()
			s.mu.Unlock()
			return fmt.Errorf("rename dataset %s to %s: %w", from, to.Name, err)
		}
		delete(s.datasets, from)
		s.datasets[to.Name] = d
	}
	d.name, d.route = to.Name, to
	info := d.infoLocked()
	d.mu.Unlock()
	// Kept in memory if the state cannot be written: a dataset still
	// being written fails at a restart under either name.
	s.persistLocked()
	s.mu.Unlock()
	s.log.Info("dataset renamed", "dataset", to.Name, "from", from, "by_job", byJob)
	s.report(Event{Kind: EventRenamed, Info: info, From: from, ByJob: byJob})
	if !byJob && s.opts.Rules.Rename {
		s.ruleFired(d, "renamed from "+from)
	}
	return nil
}

// Remove deletes a writing dataset that holds no files (the application
// removed its directory).
func (s *Store) Remove(d *Dataset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != Writing {
		return fmt.Errorf("remove dataset %s: %w", d.name, ErrReadOnly)
	}
	dir := layout.DatasetDir(s.CacheDir(), d.name)
	if err := checkEmptyDataset(dir); err != nil {
		return fmt.Errorf("remove dataset %s: %w", d.name, err)
	}
	// The state first: if it cannot be written, the dataset stays (a
	// restart would otherwise report it failed).
	delete(s.datasets, d.name)
	if err := s.persistLocked(); err != nil {
		s.datasets[d.name] = d
		return refusal("remove dataset "+d.name, err)
	}
	d.removed = true
	if d.idle != nil {
		d.idle.Stop()
	}
	if err := os.RemoveAll(dir); err != nil {
		s.log.Warn("remove empty dataset directory", "dataset", d.name, "err", err)
	}
	return nil
}

// RequestComplete asks for dataset name to complete (scrfs complete NAME). It
// completes as soon as none of its files is open for writing.
func (s *Store) RequestComplete(name, reason string) error {
	d := s.Get(name)
	if d == nil {
		return fmt.Errorf("complete %s: %w", name, ErrNotFound)
	}
	s.requestComplete(d, reason)
	return nil
}

// ruleFired requests completion because a rule fired here, and reports it.
func (s *Store) ruleFired(d *Dataset, reason string) {
	if s.requestComplete(d, reason) {
		s.report(Event{Kind: EventRuleFired, Info: d.Info(), Reason: reason})
	}
}

// requestComplete marks d as completing; it reports false if d was not
// writing or its completion was already requested.
func (s *Store) requestComplete(d *Dataset, reason string) bool {
	d.mu.Lock()
	if d.state != Writing || d.completing != "" {
		d.mu.Unlock()
		return false
	}
	d.completing = reason
	if d.idle != nil {
		d.idle.Stop()
		d.idle = nil
	}
	ready := d.writers == 0
	name, writers := d.name, d.writers
	d.mu.Unlock()
	s.log.Info("dataset completion requested", "dataset", name, "reason", reason, "open_for_write", writers)
	if ready {
		s.finishCompletion(d)
	}
	return true
}

func (s *Store) isMarker(rel string) bool {
	return slices.Contains(s.opts.Rules.Markers, rel)
}
