package node

import (
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/record"
)

// hear is what the node's protocols do at each moment of a dataset's life
// on this node (cache/events.go says when the store reports each). Read
// top to bottom, it is a checkpoint's way from the application's last
// close to the prefix:
//
//   - a completion rule fires here: node 0 completes the dataset on every
//     node (completion);
//   - it completes here: node 0's request for this node's share goes on
//     (completion), and a flush of the newest completed dataset looks
//     again (transfer);
//   - it is renamed while written: the names it owns move with it (names);
//   - the job agrees its record: its names no longer change (names), and
//     it is protected under it (redundancy);
//   - its redundancy settles: flushes that wait for it go on, and node 0
//     counts it towards flush.every (transfer);
//   - its record is revised (a share moved): other nodes' files of it are
//     looked up anew (namespace);
//   - the job fetched it from the prefix: node 0 records it again, so it
//     is protected under today's scheme (completion);
//   - it leaves the cache: completion, flushes, the names and the
//     namespace forget it;
//   - it is recorded or leaves the cache while the application has not
//     changed a pointer file since the start: the pointer files shown are
//     the newest restored checkpoint's (pointers), or while a checkpoint
//     arrives from the prefix, still the arriving one's;
//   - the dataset fetched at the start is recorded or leaves the cache:
//     the mount stops waiting for the restore (decideOnRecord), and stops
//     showing it arriving (transfer).
//
// Started, Adopted, Entry and Pointer concern the mount only (package fs
// hears them). Each protocol's part returns at once; what takes time runs in the
// protocol's own goroutines.
func (n *Node) hear(e cache.Event) {
	switch e.Kind {
	case cache.EventRuleFired:
		n.Complete.RuleFired(e.Route(), e.Reason)
	case cache.EventCompleted:
		n.Complete.Changed()
		n.Flusher.Completed()
	case cache.EventRenamed:
		n.Names.Renamed(e.From, e.Info.Name)
	case cache.EventRecorded:
		n.Names.Drop(e.Info.Name)
		n.protect(e.Info)
		n.Flusher.Recorded(e.Info.Name)
		n.restorePointers()
		n.recordedOrGone(e.Info.Name)
	case cache.EventSettled:
		n.Flusher.Settled(e.Info.Name)
	case cache.EventRevised:
		n.Namespace.Revised(e.Info.Name)
	case cache.EventFetched:
		n.Complete.Fetched(e.Info)
	case cache.EventRemoved:
		n.Flusher.Lost(e.Info)
		n.Complete.Changed()
		n.Namespace.Drop(e.Info.Name)
		n.Names.Drop(e.Info.Name)
		n.restorePointers()
		n.recordedOrGone(e.Info.Name)
	}
}

// restorePointers shows the newest served checkpoint's pointer files,
// unless a checkpoint is arriving: the mount shows its pointer files
// until it is recorded here (then this runs again), not those of an older
// one the cache still serves.
func (n *Node) restorePointers() {
	if n.Flusher.Arrival() == nil {
		n.Pointers.Restore()
	}
}

// protect protects a recorded dataset under the record kept beside its
// files (completion saves it there before the store reports it recorded).
func (n *Node) protect(info cache.Info) {
	ds := n.store.Get(info.Name)
	if ds == nil {
		return // gone again meanwhile: Removed said so
	}
	rec, err := record.Load(ds.Dir())
	if err != nil {
		n.log.Error("recorded dataset without a readable record: not protected", "dataset", info.Name, "err", err)
		return
	}
	n.Protect.Protect(rec)
}
