package fs

import (
	"context"
	"fmt"

	"github.com/scrfs/scrfs/cache"
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
}

// alone is the Job of a mount with no job to ask (Options.Job nil).
type alone struct{}

func (alone) Begin(context.Context, cache.Route) error          { return nil }
func (alone) Rename(context.Context, string, cache.Route) error { return nil }

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
	case cache.EventRemoved:
		f.forget(e.Route())
	}
}
