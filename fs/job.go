package fs

import (
	"context"
	"fmt"
	"syscall"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
)

// Job is what the mount asks the rest of the job before it changes the
// job-wide part of the namespace: every node shows every dataset
// directory, and node 0 must know when each began. Both calls take the
// FUSE request's context, so an application interrupted while it waits
// gets EINTR, and the store below never waits on the network.
type Job interface {
	// Begin returns once the job noted that dataset r begins here.
	Begin(ctx context.Context, r cache.Route) error
	// Rename returns once the job renamed writing dataset from to route
	// to on the other nodes.
	Rename(ctx context.Context, from string, to cache.Route) error

	// Shared reports whether the names inside datasets being written are
	// shared with other nodes (see names.go); the calls below are made
	// only when they are.
	Shared() bool
	// CreateName records entry m (type, mode, symlink target) at path rel
	// of writing dataset ds, created here, and reports whether other
	// nodes hold it too. excl: fail if any node created it first.
	CreateName(ctx context.Context, ds, rel string, m files.Meta, excl bool) (shared bool, err error)
	// LookupName returns entry rel of ds as another node created it.
	LookupName(ctx context.Context, ds, rel string) (files.Meta, error)
	// RemoveName and RenameName remove or rename an entry on the other
	// nodes that hold it.
	RemoveName(ctx context.Context, ds, rel string, dir bool) error
	RenameName(ctx context.Context, ds, from, to string, dir bool) error
	// ListNames returns the entries in directory dir of ds that any node
	// created (Path is the name in dir).
	ListNames(ctx context.Context, ds, dir string) ([]files.Meta, error)

	// ChangePointers makes a change of the pointer files at the mount root
	// the job's (set, then remove by name; a rename is both), and returns
	// once every node shows it, this one too (pointers.go).
	ChangePointers(ctx context.Context, set []cache.Pointer, remove []string) error
}

// alone is the Job of a mount with no job to ask (Options.Job nil).
type alone struct{}

func (alone) Begin(context.Context, cache.Route) error          { return nil }
func (alone) Rename(context.Context, string, cache.Route) error { return nil }
func (alone) Shared() bool                                      { return false }
func (alone) CreateName(context.Context, string, string, files.Meta, bool) (bool, error) {
	return false, nil
}
func (alone) LookupName(context.Context, string, string) (files.Meta, error) {
	return files.Meta{}, syscall.ENOENT
}
func (alone) RemoveName(context.Context, string, string, bool) error          { return nil }
func (alone) RenameName(context.Context, string, string, string, bool) error  { return nil }
func (alone) ListNames(context.Context, string, string) ([]files.Meta, error) { return nil, nil }
func (alone) ChangePointers(context.Context, []cache.Pointer, []string) error {
	return nil // the mount changes its store itself (FS.changePointers)
}

// obtain returns the writing dataset r names, starting it when it is new:
// the job hears of it first, then the store creates it. created reports a
// dataset started by this call.
func (f *FS) obtain(ctx context.Context, r cache.Route) (d *cache.Dataset, created bool, err error) {
	if d, err := f.store.Writing(r); d != nil || err != nil {
		return d, false, err
	}
	if err := f.job.Begin(ctx, r); err != nil {
		return nil, false, fmt.Errorf("start dataset %s: %w", r.Name, err)
	}
	return f.store.Obtain(r)
}

// rename renames writing dataset d to route to: on the other nodes first,
// then here.
func (f *FS) rename(ctx context.Context, d *cache.Dataset, to cache.Route) error {
	if err := f.job.Rename(ctx, d.Name(), to); err != nil {
		return fmt.Errorf("rename dataset %s: %w", d.Name(), err)
	}
	return f.store.Rename(d, to)
}

// hear keeps the kernel's view of the mount in step with what changed
// without the application changing it through this mount (see
// cache.Event): datasets another node started or renamed, restored ones,
// and ones that left the cache.
func (f *FS) hear(e cache.Event) {
	switch e.Kind {
	case cache.EventStarted:
		if e.ByJob {
			f.appeared(e.Route())
		}
	case cache.EventRenamed:
		if e.ByJob {
			f.forget(e.FromRoute())
			f.appeared(e.Route())
		}
	case cache.EventAdopted:
		f.appeared(e.Route())
	case cache.EventRecorded:
		f.recorded(e.Info)
	case cache.EventRemoved:
		f.forget(e.Route())
	case cache.EventEntry:
		f.entryChanged(e.Info, e.Path)
	case cache.EventPointer:
		f.pointerChanged(e.Path)
	case cache.EventArrival:
		f.arrivalChanged(e.Route())
	}
}
