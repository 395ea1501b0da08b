package daemon

import (
	"context"

	"github.com/scrfs/scrfs/record"
)

// restore brings the newest checkpoint back before the daemon reports
// ready (Protocols.Restore).
func (d *Daemon) restore(ctx context.Context) {
	d.readRecords()
	d.proto.Load().Restore(ctx, d.store, d.cfg.Restart.FromCache, d.size)
}

// readRecords gives every completed dataset whose state lacks its record's
// sequence number (the record arrived while the state could not be written,
// or the daemon died between writing one and the other) the sequence and
// time of the record kept beside its files: the store keeps such a change
// in memory only because a restart learns it again here.
func (d *Daemon) readRecords() {
	id := d.store.NodeID()
	for _, ds := range d.store.Datasets() {
		info := ds.Info()
		if !info.State.Completed() || info.Seq != 0 {
			continue
		}
		rec, err := record.Load(ds.Dir())
		if err != nil {
			if !record.IsMissing(err) {
				d.log.Warn("dataset record unreadable; node 0 proves the dataset again", "dataset", info.Name, "err", err)
			}
			continue
		}
		if rec.Dataset != info.Name || !heldBy(rec, id) {
			d.log.Warn("dataset record names another dataset or node; node 0 proves the dataset again", "dataset", info.Name)
			continue
		}
		if err := d.store.SetRecord(info.Name, rec.Seq, rec.Completed); err != nil {
			d.log.Warn("dataset record", "dataset", info.Name, "err", err)
			continue
		}
		d.log.Info("dataset record read back from the cache", "dataset", info.Name, "seq", rec.Seq)
	}
}

// heldBy reports whether node identity id holds a share of rec.
func heldBy(rec *record.Record, id string) bool {
	for i := range rec.Members {
		if rec.Members[i].HeldBy() == id {
			return true
		}
	}
	return false
}
