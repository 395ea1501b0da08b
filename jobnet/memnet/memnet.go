// Package memnet is an in-memory jobnet.Transport for tests that run a
// whole job's protocols in one process: every node joins one Network, calls
// run the target's handlers on their own goroutines, streams are bounded
// queues. Faults are injected by the test: a call's request or answer can be
// dropped or delayed, stream messages delayed (so streams reorder against
// each other, never within themselves), and a node killed at any moment —
// its handlers see their context end, calls to it fail as a broken link
// would, and its streams break — then joined again, as a restarted daemon.
//
// Like a real link, a call or stream to a node that is not joined waits
// until it joins or the caller's context ends.
package memnet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/scrfs/scrfs/internal/sleep"
	"github.com/scrfs/scrfs/jobnet"
)

// Drop is what happens to one call.
type Drop int

const (
	Deliver      Drop = iota // the handler runs and its answer arrives
	DropRequest              // the handler never runs; the caller sees a lost link
	DropResponse             // the handler runs; its answer is lost
)

// Faults decide, per call or stream message, what the network does. Nil
// functions mean a perfect network. They may be called concurrently.
type Faults struct {
	Call  func(from, to int, kind string) Drop
	Delay func(from, to int, kind string) time.Duration
	// StreamDelay delays one message on stream id from → to.
	StreamDelay func(from, to int, id string) time.Duration
	// StreamHold is how long a stream opened before its accept is held
	// before it breaks, and IOTimeout how long one Send or Recv may wait
	// for the far end, as peer.Config's; zero means DefaultTimeout.
	StreamHold, IOTimeout time.Duration
}

// DefaultTimeout is the stream hold and I/O timeout when Faults leaves
// them zero: short, so a test whose peer is gone fails fast.
const DefaultTimeout = 2 * time.Second

// ErrKilled is what a node's own calls and streams return once it has been
// killed, and what handlers' contexts are cancelled with.
var ErrKilled = errors.New("memnet: node killed")

// Network is a job's in-memory network.
type Network struct {
	faults Faults

	mu      sync.Mutex
	nodes   map[int]*Node // joined, by index
	changed chan struct{} // closed and replaced when a node joins or is killed
	waiting map[streamKey]chan *pipeEnd
	held    map[streamKey]*pipeEnd // opened before their accept
}

type streamKey struct {
	from, to int
	id       string
}

// New returns an empty network with the given faults.
func New(f Faults) *Network {
	if f.StreamHold <= 0 {
		f.StreamHold = DefaultTimeout
	}
	if f.IOTimeout <= 0 {
		f.IOTimeout = DefaultTimeout
	}
	return &Network{
		faults:  f,
		nodes:   map[int]*Node{},
		changed: make(chan struct{}),
		waiting: map[streamKey]chan *pipeEnd{},
		held:    map[streamKey]*pipeEnd{},
	}
}

// Node is one node's end of the network, a jobnet.Transport. After Kill it
// is dead for good; Join again for a new one.
type Node struct {
	net   *Network
	index int
	serve jobnet.RawHandler

	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // handlers running here (hold)

	mu      sync.Mutex
	hooks   []func(peer int, up bool)
	streams map[*pipeEnd]bool
}

var _ jobnet.Transport = (*Node)(nil)

// Join brings node index up, serving calls with serve (usually a Mux's
// Serve). A node of that index still joined is killed first.
func (n *Network) Join(index int, serve jobnet.RawHandler) *Node {
	n.Kill(index)
	ctx, cancel := context.WithCancelCause(context.Background())
	nd := &Node{net: n, index: index, serve: serve, ctx: ctx, cancel: cancel, streams: map[*pipeEnd]bool{}}
	n.mu.Lock()
	n.nodes[index] = nd
	others := n.othersLocked(index)
	n.broadcastLocked()
	n.mu.Unlock()
	for _, o := range others {
		o.linkChanged(index, true)
		nd.linkChanged(o.index, true)
	}
	return nd
}

// Kill takes node index down as a crash would: its handlers' contexts end
// (and Kill waits for them to return), calls to it and from it fail, its
// streams break. Killing a node that is not joined does nothing.
func (n *Network) Kill(index int) {
	n.mu.Lock()
	nd := n.nodes[index]
	if nd == nil {
		n.mu.Unlock()
		return
	}
	delete(n.nodes, index)
	for k, p := range n.held {
		if k.from == index || k.to == index {
			p.breakPipe()
			delete(n.held, k)
		}
	}
	others := n.othersLocked(index)
	n.broadcastLocked()
	n.mu.Unlock()
	nd.cancel(ErrKilled)
	nd.mu.Lock()
	for s := range nd.streams {
		s.breakPipe()
	}
	nd.mu.Unlock()
	nd.wg.Wait()
	for _, o := range others {
		o.linkChanged(index, false)
	}
}

// Up reports whether node index is joined.
func (n *Network) Up(index int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodes[index] != nil
}

func (n *Network) othersLocked(index int) []*Node {
	var out []*Node
	for i, o := range n.nodes {
		if i != index {
			out = append(out, o)
		}
	}
	return out
}

func (n *Network) broadcastLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// await returns node index once it is joined, waiting for it while it is
// not, until ctx or the asking node ends.
func (n *Network) await(ctx context.Context, self *Node, index int) (*Node, error) {
	for {
		n.mu.Lock()
		nd, changed := n.nodes[index], n.changed
		n.mu.Unlock()
		if nd != nil {
			return nd, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("node %d unreachable: %w", index, ctx.Err())
		case <-self.ctx.Done():
			return nil, context.Cause(self.ctx)
		}
	}
}

func (nd *Node) linkChanged(peer int, up bool) {
	nd.mu.Lock()
	hooks := append([]func(int, bool){}, nd.hooks...)
	nd.mu.Unlock()
	for _, f := range hooks {
		f(peer, up)
	}
}

// OnLinkChange implements jobnet.Transport.
func (nd *Node) OnLinkChange(f func(peer int, up bool)) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	nd.hooks = append(nd.hooks, f)
}

// Reach implements jobnet.Transport: both ends are joined (links are
// there from the start).
func (nd *Node) Reach(_ context.Context, peer int) bool {
	return nd.ctx.Err() == nil && nd.net.Up(peer)
}

// WaitUp implements jobnet.Transport.
func (nd *Node) WaitUp(ctx context.Context, peers []int) error {
	for _, p := range peers {
		if _, err := nd.net.await(ctx, nd, p); err != nil {
			return fmt.Errorf("wait for links: %w", err)
		}
	}
	return nil
}

// hold counts a handler about to run here, unless the node is being
// killed: Kill waits for the handlers it counted, and a count added while
// it waits would race with the wait (go test -race saw a call reach a
// node just as it was killed).
func (nd *Node) hold() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.ctx.Err() != nil {
		return false
	}
	nd.wg.Add(1)
	return true
}

// Call implements jobnet.Transport.
func (nd *Node) Call(ctx context.Context, to int, kind string, req []byte) ([]byte, error) {
	if nd.ctx.Err() != nil {
		return nil, context.Cause(nd.ctx)
	}
	f := nd.net.faults
	if f.Delay != nil {
		if err := sleep.For(ctx, f.Delay(nd.index, to, kind)); err != nil {
			return nil, err
		}
	}
	target, err := nd.net.await(ctx, nd, to)
	if err != nil {
		return nil, err
	}
	drop := Deliver
	if f.Call != nil {
		drop = f.Call(nd.index, to, kind)
	}
	if drop == DropRequest {
		return nil, fmt.Errorf("memnet: request dropped: %w", jobnet.ErrConnLost)
	}
	type result struct {
		b   []byte
		err error
	}
	if !target.hold() {
		return nil, fmt.Errorf("memnet: node %d went down: %w", to, jobnet.ErrConnLost)
	}
	done := make(chan result, 1)
	hctx, cancel := context.WithCancel(target.ctx)
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	stopSelf := context.AfterFunc(nd.ctx, cancel)
	defer stopSelf()
	go func() {
		defer target.wg.Done()
		defer cancel()
		b, err := target.serve(hctx, nd.index, kind, append([]byte(nil), req...))
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		if drop == DropResponse {
			return nil, fmt.Errorf("memnet: answer dropped: %w", jobnet.ErrConnLost)
		}
		return r.b, r.err
	case <-target.ctx.Done():
		return nil, fmt.Errorf("memnet: node %d went down: %w", to, jobnet.ErrConnLost)
	case <-nd.ctx.Done():
		return nil, context.Cause(nd.ctx)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
