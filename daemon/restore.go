package daemon

import "context"

// restore brings back the newest checkpoint after a (re)start, before the
// daemon reports ready: datasets that survive in the caches of the set are
// used as they are (SCR's scalable restart); when none is usable, the
// newest complete dataset is fetched from the prefix directory.
func (d *Daemon) restore(ctx context.Context) {
	if d.haveCheckpoint() {
		return
	}
	d.fetchFromPrefix(ctx)
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
