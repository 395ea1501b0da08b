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

// streamDepth is how many messages a stream direction buffers, as socket
// buffers would: a sender runs a little ahead of its receiver, not forever.
const streamDepth = 4

// ErrBroken is returned by a stream whose far end closed or whose node was
// killed.
var ErrBroken = errors.New("memnet: stream broken")

// pipeEnd is one node's end of a stream.
type pipeEnd struct {
	owner    *Node
	from, to int // this end's node and the far one's
	id       string
	in, out  *queue
	once     sync.Once
}

// queue is one direction of a stream.
type queue struct {
	ch     chan []byte
	closed chan struct{} // the sender closed (or broke) its end
	once   sync.Once
}

func newQueue() *queue {
	return &queue{ch: make(chan []byte, streamDepth), closed: make(chan struct{})}
}

func (q *queue) close() { q.once.Do(func() { close(q.closed) }) }

func (p *pipeEnd) breakPipe() {
	p.in.close()
	p.out.close()
}

// ioContext bounds one Send or Recv by the network's I/O timeout.
func (p *pipeEnd) ioContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.owner.net.faults.IOTimeout)
}

// Send implements jobnet.Stream.
func (p *pipeEnd) Send(ctx context.Context, msg []byte) error {
	ctx, cancel := p.ioContext(ctx)
	defer cancel()
	if f := p.owner.net.faults.StreamDelay; f != nil {
		if err := sleep.For(ctx, f(p.from, p.to, p.id)); err != nil {
			return err
		}
	}
	select {
	case <-p.out.closed:
		return fmt.Errorf("send on stream %s to node %d: %w", p.id, p.to, ErrBroken)
	case <-p.in.closed:
		return fmt.Errorf("send on stream %s to node %d: %w", p.id, p.to, ErrBroken)
	default:
	}
	select {
	case p.out.ch <- append([]byte(nil), msg...):
		return nil
	case <-p.out.closed:
		return fmt.Errorf("send on stream %s to node %d: %w", p.id, p.to, ErrBroken)
	case <-p.in.closed:
		return fmt.Errorf("send on stream %s to node %d: %w", p.id, p.to, ErrBroken)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Recv implements jobnet.Stream: queued messages are delivered even after
// the far end closed, as TCP delivers what was sent before a FIN.
func (p *pipeEnd) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	ctx, cancel := p.ioContext(ctx)
	defer cancel()
	select {
	case m := <-p.in.ch:
		return append(buf[:0], m...), nil
	default:
	}
	select {
	case m := <-p.in.ch:
		return append(buf[:0], m...), nil
	case <-p.in.closed:
		select {
		case m := <-p.in.ch:
			return append(buf[:0], m...), nil
		default:
		}
		return nil, fmt.Errorf("recv on stream %s from node %d: %w", p.id, p.to, ErrBroken)
	case <-p.out.closed:
		return nil, fmt.Errorf("recv on stream %s from node %d: %w", p.id, p.to, ErrBroken)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close implements jobnet.Stream.
func (p *pipeEnd) Close() error {
	p.out.close()
	p.owner.mu.Lock()
	delete(p.owner.streams, p)
	p.owner.mu.Unlock()
	return nil
}

func (nd *Node) track(p *pipeEnd) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.ctx.Err() != nil {
		return context.Cause(nd.ctx)
	}
	nd.streams[p] = true
	return nil
}

// OpenStream implements jobnet.Transport.
func (nd *Node) OpenStream(ctx context.Context, to int, id string) (jobnet.Stream, error) {
	if _, err := nd.net.await(ctx, nd, to); err != nil {
		return nil, err
	}
	ab, ba := newQueue(), newQueue()
	mine := &pipeEnd{owner: nd, from: nd.index, to: to, id: id, in: ba, out: ab}
	theirs := &pipeEnd{from: to, to: nd.index, id: id, in: ab, out: ba}
	if err := nd.track(mine); err != nil {
		return nil, err
	}
	k := streamKey{from: nd.index, to: to, id: id}
	n := nd.net
	n.mu.Lock()
	target := n.nodes[to]
	if target == nil {
		n.mu.Unlock()
		mine.breakPipe()
		return nil, fmt.Errorf("open stream %s: node %d went down: %w", id, to, jobnet.ErrConnLost)
	}
	theirs.owner = target
	if w := n.waiting[k]; w != nil {
		delete(n.waiting, k)
		n.mu.Unlock()
		w <- theirs
		return mine, nil
	}
	if n.held[k] != nil {
		n.mu.Unlock()
		mine.breakPipe()
		return nil, fmt.Errorf("open stream %s to node %d: duplicate stream id", id, to)
	}
	n.held[k] = theirs
	n.mu.Unlock()
	// Not accepted within the hold time: dropped, as peer drops it.
	time.AfterFunc(n.faults.StreamHold, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.held[k] == theirs {
			delete(n.held, k)
			theirs.breakPipe()
		}
	})
	return mine, nil
}

// AcceptStream implements jobnet.Transport.
func (nd *Node) AcceptStream(ctx context.Context, from int, id string) (jobnet.Stream, error) {
	k := streamKey{from: from, to: nd.index, id: id}
	n := nd.net
	n.mu.Lock()
	if p := n.held[k]; p != nil {
		delete(n.held, k)
		n.mu.Unlock()
		if err := nd.track(p); err != nil {
			p.breakPipe()
			return nil, err
		}
		return p, nil
	}
	if n.waiting[k] != nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("accept stream %s from node %d: duplicate stream id", id, from)
	}
	w := make(chan *pipeEnd, 1)
	n.waiting[k] = w
	n.mu.Unlock()
	select {
	case p := <-w:
		if err := nd.track(p); err != nil {
			p.breakPipe()
			return nil, err
		}
		return p, nil
	case <-ctx.Done():
	case <-nd.ctx.Done():
	}
	n.mu.Lock()
	if n.waiting[k] == w {
		delete(n.waiting, k)
	}
	n.mu.Unlock()
	select {
	case p := <-w: // opened just as we gave up
		p.breakPipe()
	default:
	}
	if nd.ctx.Err() != nil {
		return nil, context.Cause(nd.ctx)
	}
	return nil, fmt.Errorf("accept stream %s from node %d: %w", id, from, ctx.Err())
}
