package node

import (
	"context"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
	"github.com/scrfs/scrfs/transfer"
)

// Incomplete is why a dataset a killed daemon left being written fails.
const Incomplete = "incomplete: it was being written when the daemon stopped"

// Restore brings the node's checkpoints back after its start, before it
// reports ready. Datasets that were still being written are failed: their
// writers are gone and they were never complete. This run then joins node
// 0, which proves the datasets complete here but never recorded. With
// fromCache (SCR_DISTRIBUTE) the set takes stock and rebuilds what a lost
// member held; without it the cache is cleared. Then the job restores the
// newest intact checkpoint, wherever it is: the one the caches hold, or a
// newer one it fetches from the prefix (transfer's Restore). Flushes start
// once it returns.
func (n *Node) Restore(ctx context.Context, fromCache bool) {
	defer n.Flusher.Start()
	s := n.store
	s.FailWriting(Incomplete)
	if err := n.Complete.Join(ctx); err != nil {
		n.log.Error("could not join node 0: datasets complete here stay unrecorded until it answers", "err", err)
	}
	switch {
	case !fromCache:
		for _, ds := range s.Datasets() {
			s.Drop(ds.Name(), "restart.from_cache = false")
		}
	case n.size > 1 && n.Protect.Scheme() != schemes.Single, n.fromLargerJob():
		n.Protect.Restart(ctx)
	default:
		// Datasets recorded but not yet protected when the daemon stopped.
		for _, ds := range s.Datasets() {
			if ds.State() == cache.Recorded {
				n.protect(ds.Info())
			}
		}
	}
	n.Flusher.Restore(ctx)
	n.Pointers.Restored(ctx)
	if r := n.Flusher.Restored(); r != nil && r.From == transfer.FromPrefix {
		n.decideOnRecord(r.Dataset)
		return
	}
	s.Decided()
}

// decideOnRecord lets the mount show what it holds once dataset name,
// fetched at the start, is recorded here: before its record is kept beside
// its files the view holds this node's files only, and a rank reading
// another rank's files (a resharded load) would find none. The record
// comes from node 0 once every node adopted its share (heard in
// recordedOrGone); should it never come, the store's own bound ends the
// mount's wait.
func (n *Node) decideOnRecord(name string) {
	n.fetchedMu.Lock()
	defer n.fetchedMu.Unlock()
	ds := n.store.Get(name)
	if ds == nil {
		n.store.Decided()
		return
	}
	if _, err := record.Load(ds.Dir()); err == nil {
		n.store.Decided()
		return
	}
	n.fetched = name
}

// recordedOrGone ends the mount's wait for the dataset fetched at the
// start once it is recorded here or has left the cache.
func (n *Node) recordedOrGone(name string) {
	n.fetchedMu.Lock()
	defer n.fetchedMu.Unlock()
	if n.fetched != "" && n.fetched == name {
		n.fetched = ""
		n.store.Decided()
	}
}

// fromLargerJob reports whether the cache holds a dataset recorded by a
// job of several nodes: a job restarted on one node takes stock of it too
// (its other members are away or gone), as a larger one would.
func (n *Node) fromLargerJob() bool {
	for _, ds := range n.store.Datasets() {
		if ds.Info().Seq == 0 {
			continue
		}
		if rec, err := record.Load(ds.Dir()); err == nil && len(rec.Members) > 1 {
			return true
		}
	}
	return false
}

// recallRecords gives every dataset complete here whose state lacks its
// record (the record arrived while the state could not be written, or the
// daemon died between writing one and the other) the sequence and time of
// the record kept beside its files: the store keeps such a change in
// memory only because a start learns it again here. It runs before the
// node hears the store's events: these records are not news, and what
// protects them is the restore (Restore).
func (n *Node) recallRecords() {
	id := n.store.NodeID()
	for _, ds := range n.store.Datasets() {
		info := ds.Info()
		if !info.State.Completed() || info.Seq != 0 {
			continue
		}
		rec, err := record.Load(ds.Dir())
		if err != nil {
			if !record.IsMissing(err) {
				n.log.Warn("dataset record unreadable; node 0 proves the dataset again", "dataset", info.Name, "err", err)
			}
			continue
		}
		if rec.Dataset != info.Name || !heldBy(rec, id) {
			n.log.Warn("dataset record names another dataset or node; node 0 proves the dataset again", "dataset", info.Name)
			continue
		}
		if err := n.store.SetRecord(info.Name, rec.Seq, rec.Completed); err != nil {
			n.log.Warn("dataset record", "dataset", info.Name, "err", err)
			continue
		}
		n.log.Info("dataset record read back from the cache", "dataset", info.Name, "seq", rec.Seq)
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
