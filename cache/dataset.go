package cache

import (
	"os"
	"sync"
	"time"

	"github.com/scrfs/scrfs/layout"
)

// Dataset is one checkpoint's files on this node. Its methods are safe for
// concurrent use; the fs package calls the Open/Close pair on every open for
// writing, so they take only the dataset's own lock.
type Dataset struct {
	store *Store
	id    uint64 // creation order; "newer" means a larger id

	// mu protects the fields below. Lock order: Store.mu before Dataset.mu.
	mu         sync.Mutex
	name       string
	route      Route
	state      State
	reason     string
	created    time.Time
	completed  time.Time // job-wide once recorded (seq > 0), this node's before
	seq        uint64    // job-wide completion sequence from the dataset's record; 0 until recorded
	settleBy   time.Time // its redundancy is being applied since its record came: deletes wait until Settled, or this time at the latest
	began      string    // the daemon run (incarnation) that created it here; "" if not this node's writing
	files      int64     // exact once complete; maintained approximately while writing
	bytes      int64
	writers    int    // handles open for writing
	completing string // why completion was requested; "" = not requested
	lastClose  time.Time
	idle       *time.Timer
	pins       int // holds against eviction (encode, flush in progress)
	flush      FlushStatus
	removed    bool
	kept       bool // failed, its files kept (kept.go)
	// placeholders are files made here only to show names other nodes
	// created (see Placeholder).
	placeholders map[string]bool
	// writes says how its files were written here (written.go).
	writes writes
}

// Name returns the dataset's current name (a rename may change it).
func (d *Dataset) Name() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.name
}

// ID returns the dataset's creation sequence number.
func (d *Dataset) ID() uint64 { return d.id }

// Dir returns the dataset's cache directory. It changes on rename.
func (d *Dataset) Dir() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return layout.DatasetDir(d.store.CacheDir(), d.name)
}

// ShareDir returns where this node keeps the share of the member of
// identity id: its hosted directory when this node rebuilt that share for
// a node gone from the job (layout.HostedDir), else the dataset directory
// (the node's own share, or one rebuilt onto it as a replacement).
func (d *Dataset) ShareDir(id string) string {
	dir := d.Dir()
	if h := layout.HostedDir(dir, id); isDir(h) {
		return h
	}
	return dir
}

// Route returns how the dataset is anchored in the mount.
func (d *Dataset) Route() Route {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.route
}

// State returns the dataset's state.
func (d *Dataset) State() State {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

// Writable reports whether the application may still change the dataset.
func (d *Dataset) Writable() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state == Writing && !d.removed
}

// OpenWrite records a handle opened for writing (or a create). It fails with
// ErrReadOnly once the dataset is complete. Every successful OpenWrite must be
// paired with one CloseWrite.
func (d *Dataset) OpenWrite() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != Writing || d.removed {
		return ErrReadOnly
	}
	d.writers++
	if d.idle != nil {
		d.idle.Stop()
		d.idle = nil
	}
	return nil
}

// CloseWrite records that a handle opened with OpenWrite was released. rel is
// the file's path inside the dataset; grew is how many bytes the file grew
// (negative if it shrank) while the handle was open, and created says the
// handle created the file. Closing the last writer of a dataset whose
// completion was requested completes it.
func (d *Dataset) CloseWrite(rel string, grew int64, created bool) {
	d.mu.Lock()
	d.writers--
	d.bytes += grew
	if created {
		d.files++
	}
	d.lastClose = time.Now()
	d.wroteLocked(rel, grew)
	marker := d.store.isMarker(rel)
	ready := d.writers == 0 && d.completing != ""
	if d.writers == 0 && !ready && !marker {
		d.armIdleLocked()
	}
	d.mu.Unlock()
	d.store.countWritten(grew)
	switch {
	case marker:
		d.store.ruleFired(d, "marker "+rel)
	case ready:
		d.store.finishCompletion(d)
	}
}

// EntryAppeared reports an entry that came into existence without a write
// handle (rename into place, hard link, symlink): it may be a marker.
func (d *Dataset) EntryAppeared(rel string) {
	if d.store.isMarker(rel) {
		d.store.ruleFired(d, "marker "+rel)
	}
}

// AddUsage adjusts the dataset's file and byte counts for changes the
// application made outside a write handle (unlink, truncate by path).
func (d *Dataset) AddUsage(files, bytes int64) {
	d.mu.Lock()
	d.files += files
	d.bytes += bytes
	d.mu.Unlock()
}

// Pin holds the dataset against eviction until the returned function is
// called (exactly once). Encode and flush pin the dataset they work on.
func (d *Dataset) Pin() (unpin func()) {
	d.mu.Lock()
	d.pins++
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			d.pins--
			d.mu.Unlock()
			d.store.evict()
		})
	}
}

// armIdleLocked starts the idle-completion timer when an idle rule is
// configured and nothing is open. d.mu must be held.
func (d *Dataset) armIdleLocked() {
	wait := d.store.idle
	if wait <= 0 || d.state != Writing || d.completing != "" {
		return
	}
	if d.idle != nil {
		d.idle.Stop()
	}
	d.idle = time.AfterFunc(wait, func() {
		d.mu.Lock()
		fire := d.writers == 0 && d.state == Writing && d.completing == "" && time.Since(d.lastClose) >= wait
		d.mu.Unlock()
		if fire {
			d.store.ruleFired(d, "idle "+wait.String())
		}
	})
}

// Info is a snapshot of a dataset for reports and persistence.
type Info struct {
	ID         uint64      `json:"id"`
	Name       string      `json:"name"`
	Kind       Kind        `json:"kind"`
	Root       string      `json:"root"`
	State      State       `json:"state"`
	Reason     string      `json:"reason,omitempty"`
	Created    time.Time   `json:"created"`
	Completed  time.Time   `json:"completed,omitzero"`
	Seq        uint64      `json:"seq,omitempty"`   // job-wide completion order, once recorded
	Began      string      `json:"began,omitempty"` // the daemon run that created it here
	Files      int64       `json:"files"`
	Bytes      int64       `json:"bytes"`
	Writers    int         `json:"open_for_write"`
	Completing string      `json:"completing,omitempty"`
	Flush      FlushStatus `json:"flush,omitzero"`
	// Kept marks a failed dataset whose files this node keeps (the state
	// file lists those apart).
	Kept bool `json:"-"`
}

// Route returns where the dataset sits in the mount.
func (i Info) Route() Route { return Route{Name: i.Name, Kind: i.Kind, Root: i.Root} }

// Info returns a snapshot of the dataset.
func (d *Dataset) Info() Info {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.infoLocked()
}

func (d *Dataset) infoLocked() Info {
	return Info{
		ID: d.id, Name: d.name, Kind: d.route.Kind, Root: d.route.Root,
		State: d.state, Reason: d.reason, Created: d.created, Completed: d.completed,
		Seq: d.seq, Began: d.began, Files: d.files, Bytes: d.bytes, Writers: d.writers, Completing: d.completing,
		Flush: d.flush, Kept: d.kept,
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
