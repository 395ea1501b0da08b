package cache

import (
	"fmt"
	"path"
)

// A dataset's life on this node is a sequence of events, and the store,
// where every part of the daemon acts on datasets, is where they are
// reported: the one seam between the store and what reacts to it. This
// file names every event, when the store reports it, and who hears it
// (package node wires the coordination protocols to them, package fs the
// kernel's caches); changing what happens when a checkpoint completes, say,
// starts here.
//
//	event      reported when                                    heard by
//	---------  -----------------------------------------------  -------------------------------------
//	Started    a writing dataset was created here: by the        fs (ByJob: the directory appeared
//	           application once the job agreed (Obtain), or      without the application making it here)
//	           because another node started it (Started, ByJob)
//	Renamed    a writing dataset was renamed here: by the        fs (ByJob: the old name is gone, the
//	           application (Rename) or after another node        new one appeared), names (keeps its
//	           renamed it (Renamed, ByJob)                      entries under the new name)
//	RuleFired  a completion rule fired here for a writing        completion (completion is job-wide:
//	           dataset                                          node 0 completes it on every node)
//	Completed  every file of a dataset is closed here and its    completion (node 0 waits for this node's
//	           completion requested: it is complete here         share), transfer (a flush of the newest
//	                                                            completed dataset waits for it)
//	Recorded   the job agreed the dataset's record (SetRecord)   redundancy (protects it under its record),
//	                                                            names (its names no longer change), fs
//	                                                            (files several nodes wrote are read as one)
//	Revised    its record was revised: a share moved (Revised)   namespace (reads the record again)
//	Settled    its redundancy is settled here (Settled)          transfer (flushes wait for it; node 0
//	                                                            counts it towards flush.every)
//	Adopted    scrfs put a dataset's files in place: fetched,    fs (the directory appeared)
//	           rebuilt, or an empty share (Adopt)
//	Fetched    the job fetched it from the prefix: every node    completion (node 0 records it again, so
//	           adopted its share (Fetched, node 0)               it is protected under today's scheme)
//	Removed    it left the cache: evicted, failed or dropped     fs (drops it from the kernel's caches),
//	                                                            completion, transfer, names, namespace
//	Entry      an entry of a writing dataset was removed or     fs (the kernel drops the name)
//	           renamed here because the application did so
//	           on another node (RemoveEntry, RenameEntry)
//	Pointer    a pointer file at the mount root changed (Path;  fs (the kernel drops the name and
//	           ChangePointers, RestorePointers); Info is zero  what it read of it)
//	Arrival    the mount began or stopped showing a dataset     fs (the kernel drops the name, and
//	           fetched at the start before its bytes are here  looks it up again)
//	           (ArrivalChanged); Info holds its route only
//
// The store calls its listeners on the goroutine that made the change,
// after the change is persisted (or kept in memory while the store is
// read-only), without its locks held, in the order they were attached. A
// listener must not block: what takes time (a round between nodes, an
// encode) runs in the background of the protocol that owns it. (fs waits,
// bounded, for the kernel to drop a name an Entry event changed, so that
// the call on the node that changed it returns only once every node shows
// the change: see fs/names.go.)

// EventKind names a dataset event.
type EventKind uint8

// The dataset events; see the table above.
const (
	EventStarted EventKind = iota + 1
	EventRenamed
	EventRuleFired
	EventCompleted
	EventRecorded
	EventRevised
	EventSettled
	EventAdopted
	EventFetched
	EventRemoved
	EventEntry
	EventPointer
	EventArrival
)

var eventNames = [...]string{
	EventStarted: "started", EventRenamed: "renamed", EventRuleFired: "rule fired", EventCompleted: "completed",
	EventRecorded: "recorded", EventRevised: "revised", EventSettled: "settled", EventAdopted: "adopted",
	EventFetched: "fetched", EventRemoved: "removed", EventEntry: "entry", EventPointer: "pointer",
	EventArrival: "arrival",
}

// String returns the event's name.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is one moment of a dataset's life on this node.
type Event struct {
	Kind EventKind
	// Info is the dataset as the event left it.
	Info Info
	// From is a Renamed dataset's former name.
	From string
	// Reason is why a RuleFired rule fired.
	Reason string
	// Path is the entry inside the dataset an Entry event is about, or
	// the name of a Pointer event's pointer file.
	Path string
	// ByJob marks a Started or Renamed dataset that the job changed on
	// another node's behalf, not the application through this mount.
	ByJob bool
}

// Route returns where the event's dataset sits in the mount.
func (e Event) Route() Route { return e.Info.Route() }

// FromRoute returns where a Renamed dataset sat before: a directory
// dataset's root ends in its name, a flat one's is the shared directory.
func (e Event) FromRoute() Route {
	r := Route{Name: e.From, Kind: e.Info.Kind, Root: e.Info.Root}
	if r.Kind == KindDir {
		r.Root = path.Join(path.Dir(e.Info.Root), e.From)
	}
	return r
}

// A Listener hears the store's dataset events.
type Listener func(Event)

// Listen attaches l to the store's events. The daemon's parts attach while
// it is built, before the mount or a peer can change a dataset.
func (s *Store) Listen(l Listener) {
	s.listenMu.Lock()
	defer s.listenMu.Unlock()
	s.listeners = append(s.listeners, l)
}

// report tells every listener about e. No store lock may be held.
func (s *Store) report(e Event) {
	s.listenMu.Lock()
	ls := s.listeners
	s.listenMu.Unlock()
	for _, l := range ls {
		l(e)
	}
}

// reportInfo reports an event of kind k about the dataset info describes.
func (s *Store) reportInfo(k EventKind, info Info) { s.report(Event{Kind: k, Info: info}) }
