// Package group owns goroutines: every goroutine a protocol starts is
// started through its Group, which cancels them together and waits for
// them, so a daemon that shuts down knows nothing it started still runs when
// it closes the store underneath.
package group

import (
	"context"
	"sync"
)

// Group is a set of goroutines that share a context and an owner who waits
// for them. The zero value is not usable; call New.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc

	// mu protects stopped and orders wg.Add before wg.Wait.
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

// New returns a group whose goroutines' context ends when parent's does or
// when Stop is called.
func New(parent context.Context) *Group {
	ctx, cancel := context.WithCancel(parent)
	return &Group{ctx: ctx, cancel: cancel}
}

// Context returns the group's context: cancelled by Stop or by the parent.
func (g *Group) Context() context.Context { return g.ctx }

// Go runs f on a new goroutine with the group's context. After Stop it runs
// nothing and returns false: work that arrives during shutdown is refused,
// not left running past the owner.
func (g *Group) Go(f func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f(g.ctx)
	}()
	return true
}

// Stop cancels the group's context, refuses new goroutines and waits for
// the running ones to return. It is idempotent.
func (g *Group) Stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
}
