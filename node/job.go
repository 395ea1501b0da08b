package node

import (
	"context"

	"github.com/scrfs/scrfs/cache"
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
