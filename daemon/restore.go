package daemon

import (
	"context"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/schemes"
)

// restore brings back the newest checkpoint after a (re)start, before the
// daemon reports ready. Datasets that were still being written are failed:
// their writers are gone and they were never complete. With
// restart.from_cache (SCR_DISTRIBUTE) the set takes stock and rebuilds what
// a lost member held; without it the cache is cleared. When no completed
// dataset is left, the newest complete one is fetched from the prefix.
func (d *Daemon) restore(ctx context.Context) {
	d.store.FailWriting("incomplete: it was being written when the daemon stopped")
	p := d.protect.Load()
	switch {
	case !d.cfg.Restart.FromCache:
		for _, ds := range d.store.Datasets() {
			d.store.Drop(ds.Name(), "restart.from_cache = false")
		}
	case d.size > 1 && p.Scheme() != schemes.Single:
		p.Restart(ctx)
	default:
		// Datasets completed but not yet recorded when the daemon stopped.
		for _, ds := range d.store.Datasets() {
			if info := ds.Info(); info.State == cache.Complete {
				p.Protect(info)
			}
		}
	}
	if !d.haveCheckpoint() {
		d.flusher.Fetch(ctx)
	}
}

// haveCheckpoint reports whether a completed dataset is in the cache.
func (d *Daemon) haveCheckpoint() bool {
	for _, ds := range d.store.Datasets() {
		if ds.State().Completed() {
			return true
		}
	}
	return false
}
