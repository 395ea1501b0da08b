package node

import (
	"context"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/names"
)

// What the mount asks the job (fs.Job) before it changes the job-wide
// namespace, on the application's behalf: its request's context bounds
// the wait, and so does the daemon's life (Interrupt).

// Begin returns once node 0 noted that dataset r begins here, and every
// other node shows its directory (or was given up on).
func (n *Node) Begin(ctx context.Context, r cache.Route) error {
	ctx, stop := n.forMount(ctx)
	defer stop()
	return n.Complete.Begin(ctx, r)
}

// Rename returns once writing dataset from is renamed to route to on
// every other node.
func (n *Node) Rename(ctx context.Context, from string, to cache.Route) error {
	ctx, stop := n.forMount(ctx)
	defer stop()
	return n.Complete.Rename(ctx, from, to)
}

// Interrupt ends every call the mount is waiting on for an application
// (Begin, Rename), whose call then fails with EINTR: the daemon calls it
// first when it stops, so that unmounting never waits for node 0 on an
// application's behalf.
func (n *Node) Interrupt() { n.interrupt() }

// forMount returns ctx, ended also by Interrupt.
func (n *Node) forMount(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(n.mountCalls, cancel)
	return ctx, func() { stop(); cancel() }
}

// The names of a dataset being written are the job's (package names): the
// mount asks their owners before it changes or misses one. In a job of one
// node every name is this node's own, and nothing is asked (Shared).
//
// A signal does not cut these calls short, unlike Begin: an application's
// open or mkdir inside a dataset asks an owner on every create, a harmless
// signal arrives during one often enough (the Go runtime preempts its
// threads with one), and many programs do not retry open or mkdir on EINTR.
// The member timeout bounds them, and a stopping daemon ends them
// (Interrupt).

// forNames returns the context of a call about names for the mount:
// ended by Interrupt and the member timeout (names), not by a signal to
// the application.
func (n *Node) forNames(ctx context.Context) (context.Context, context.CancelFunc) {
	return n.forMount(context.WithoutCancel(ctx))
}

// Shared reports whether the names of datasets being written are shared
// with other nodes, so the mount must ask the job about them.
func (n *Node) Shared() bool { return n.size > 1 }

// CreateName records entry m at path rel of writing dataset ds, created
// here, and reports whether other nodes hold it too (another created it
// first, or looked it up).
func (n *Node) CreateName(ctx context.Context, ds, rel string, m files.Meta, excl bool) (shared bool, err error) {
	ctx, stop := n.forNames(ctx)
	defer stop()
	e, err := n.Names.Create(ctx, ds, rel, names.Entry{Type: m.Type, Mode: m.Mode, Target: m.Target}, excl)
	return len(e.Holders) > 1, err
}

// LookupName returns entry rel of writing dataset ds as another node
// created it; this node then makes its own copy of the name.
func (n *Node) LookupName(ctx context.Context, ds, rel string) (files.Meta, error) {
	ctx, stop := n.forNames(ctx)
	defer stop()
	e, err := n.Names.Lookup(ctx, ds, rel)
	return files.Meta{Path: rel, Type: e.Type, Mode: e.Mode, Target: e.Target}, err
}

// RemoveName removes entry rel of writing dataset ds on every other node.
func (n *Node) RemoveName(ctx context.Context, ds, rel string, dir bool) error {
	ctx, stop := n.forNames(ctx)
	defer stop()
	return n.Names.Remove(ctx, ds, rel, dir)
}

// RenameName renames entry from of writing dataset ds to to on every
// other node (dir: a directory, and what is below it).
func (n *Node) RenameName(ctx context.Context, ds, from, to string, dir bool) error {
	ctx, stop := n.forNames(ctx)
	defer stop()
	if dir {
		return n.Names.RenameDir(ctx, ds, from, to)
	}
	return n.Names.Rename(ctx, ds, from, to)
}

// ListNames returns the entries directly in directory dir ("" for the
// root) of writing dataset ds that any node created, by name.
func (n *Node) ListNames(ctx context.Context, ds, dir string) ([]files.Meta, error) {
	ctx, stop := n.forNames(ctx)
	defer stop()
	es, err := n.Names.List(ctx, ds, dir)
	out := make([]files.Meta, 0, len(es))
	for name, e := range es {
		out = append(out, files.Meta{Path: name, Type: e.Type, Mode: e.Mode, Target: e.Target})
	}
	return out, err
}

// ChangePointers makes a change of the pointer files at the mount root the
// job's (package pointers): files set, files removed (both: a rename). It
// returns once every node shows it, this one included.
func (n *Node) ChangePointers(ctx context.Context, set []cache.Pointer, remove []string) error {
	ctx, stop := n.forMount(context.WithoutCancel(ctx))
	defer stop()
	return n.Pointers.Change(ctx, set, remove)
}
