package daemon

import "context"

// restore brings the newest checkpoint back before the daemon reports
// ready (Protocols.Restore).
func (d *Daemon) restore(ctx context.Context) {
	d.proto.Load().Restore(ctx, d.store, d.cfg.Restart.FromCache, d.size)
}
