package daemon

import "context"

// fetchFromPrefix fetches the newest usable dataset from the prefix
// directory into the cache (issue 5 brings the protocol; until then a
// restart without a usable cache starts empty).
func (d *Daemon) fetchFromPrefix(ctx context.Context) {
	if d.cfg.Paths.Prefix == "" || !d.cfg.Fetch.Enabled {
		return
	}
	d.log.Warn("no checkpoint in cache and fetching from the prefix is not implemented yet; starting empty")
}
