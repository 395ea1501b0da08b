package names

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/jobnet"
)

// Store is what the names need of the node-local cache: whether this
// node's tables can speak for a dataset, and what the job did on another
// node applied to this node's copy of an entry. *cache.Store implements
// it.
type Store interface {
	Get(name string) *cache.Dataset
	Failures() []cache.Info
	ReadOnly() (cache.ReadOnly, bool)
	// RemoveEntry removes this node's copy of entry rel of writing
	// dataset name (a directory only if empty); RenameEntry renames it.
	// A copy this node does not have is no error.
	RemoveEntry(name, rel string, dir bool) error
	RenameEntry(name, from, to string) error
}

// Options configure the Names of one node.
type Options struct {
	Mux   *jobnet.Mux
	Store Store
	// Nodes is the number of nodes in the job; this node is Mux.Self().
	Nodes int
	// Incarnation names this run of the daemon: its tables speak only for
	// the datasets it began (a run that started later never saw the
	// names created before).
	Incarnation string
	// MemberTimeout bounds how long a call waits for an owner that does
	// not answer (restart.member_timeout).
	MemberTimeout time.Duration
	Logger        *slog.Logger
}

// Entry is a name of a writing dataset as its owner keeps it.
type Entry struct {
	Type   files.Type `json:"type"`
	Mode   uint32     `json:"mode"`             // permission bits, 07777
	Target string     `json:"target,omitempty"` // a symlink's
	// Holders are the nodes that hold a copy of the name: the node that
	// created it, and those that looked it up or opened it since.
	Holders []int `json:"holders"`
}

// The names' sentinel errors carry the errno an application sees: the
// mount maps them, and jobnet's error codes (node.ErrorCodes) keep them
// across nodes.
var (
	// ErrNotFound: no node created the entry.
	ErrNotFound error = &errnoError{"no such entry in the dataset being written", syscall.ENOENT}
	// ErrExists: an exclusive create of an entry some node created first,
	// or a create of another type than the entry has.
	ErrExists error = &errnoError{"entry exists", syscall.EEXIST}
	// ErrNotEmpty: a directory removed while some node holds an entry in
	// it.
	ErrNotEmpty error = &errnoError{"directory not empty", syscall.ENOTEMPTY}
	// ErrUnknown: the owner of a name cannot speak for the dataset: it is
	// down, or its daemon started after the dataset began and never saw
	// the names created before. The dataset cannot complete (a node that
	// stops while a dataset is written fails it); the application's call
	// fails with EIO rather than be told a name does not exist.
	ErrUnknown error = &errnoError{"the node that keeps the name cannot speak for the dataset", syscall.EIO}
	// errNotYet: the owner has not heard yet that the dataset began; the
	// caller asks again until the member timeout.
	errNotYet error = &errnoError{"the node that keeps the name has not heard of the dataset yet", syscall.EAGAIN}
)

// Codes keep the names' sentinel errors across nodes: every node of a job
// passes them to jobnet.NewMux.
var Codes = []jobnet.Code{
	{Name: "no_entry", Err: ErrNotFound},
	{Name: "entry_exists", Err: ErrExists},
	{Name: "dir_not_empty", Err: ErrNotEmpty},
	{Name: "names_unknown", Err: ErrUnknown},
	{Name: "names_not_yet", Err: errNotYet},
}

// errnoError is a sentinel error that means errno to an application.
type errnoError struct {
	msg   string
	errno syscall.Errno
}

func (e *errnoError) Error() string { return e.msg }
func (e *errnoError) Unwrap() error { return e.errno }

// Names is one node's part of the job-wide names of writing datasets: the
// tables of the paths it owns, and the calls the mount makes to owners.
// Create it with New before the transport delivers calls.
type Names struct {
	o    Options
	self int
	net  *jobnet.Protocol
	log  *slog.Logger
	own  tables // the entries this node owns
}

// New returns this node's Names and registers its requests.
func New(o Options) *Names {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Names{o: o, self: o.Mux.Self(), net: o.Mux.Protocol("names"), log: o.Logger,
		own: tables{byDataset: map[string]map[string]*Entry{}}}
	n.handle()
	return n
}

// Owner returns the node that owns path rel of a dataset in a job of
// nodes nodes: a hash of the path alone, so a dataset renamed while it is
// written keeps its owners.
func Owner(rel string, nodes int) int {
	h := fnv.New64a()
	h.Write([]byte(rel))
	return int(h.Sum64() % uint64(nodes))
}

// owner is Owner for this job.
func (n *Names) owner(rel string) int { return Owner(rel, n.o.Nodes) }

// callContext bounds a call to an owner by the member timeout, within ctx
// (the application's request).
func (n *Names) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, n.o.MemberTimeout)
}

// speaksFor checks that this node's tables speak for writing dataset ds:
// this run of the daemon holds it, being written, and began it (here, or
// when the job told it another node did).
func (n *Names) speaksFor(ds string) error {
	d := n.o.Store.Get(ds)
	if d == nil {
		if _, readOnly := n.o.Store.ReadOnly(); readOnly {
			// It refused the dataset: its names cannot be kept here
			// (ENOSPC, as the dataset's own mkdir got).
			return fmt.Errorf("node %d cannot hold %s: %w", n.self, ds, cache.ErrControlFull)
		}
		for _, f := range n.o.Store.Failures() {
			if f.Name == ds {
				return fmt.Errorf("node %d: %s failed here (%s): %w", n.self, ds, f.Reason, ErrUnknown)
			}
		}
		return fmt.Errorf("node %d: %s: %w", n.self, ds, errNotYet)
	}
	switch info := d.Info(); {
	case info.State != cache.Writing:
		return fmt.Errorf("node %d: %s is %s here: %w", n.self, ds, info.State.Shown(), ErrUnknown)
	case info.Began != n.o.Incarnation:
		return fmt.Errorf("node %d: an earlier run of its daemon began %s: %w", n.self, ds, ErrUnknown)
	}
	return nil
}

// Drop forgets the entries of dataset name this node owns: it was recorded,
// or left the cache, and its names no longer change.
func (n *Names) Drop(name string) { n.own.drop(name) }

// Renamed moves the entries of dataset from this node owns to its new
// name: the application renamed the dataset while writing it.
func (n *Names) Renamed(from, to string) { n.own.rename(from, to) }
