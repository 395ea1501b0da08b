package schemes

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// memNet is an in-memory Links for p members: one unbuffered directed pipe
// per ordered pair. Send returns only after the receiver copied the message,
// as the strictest reading of the Conn contract, so any algorithm that could
// deadlock with a real network deadlocks here.
type memNet struct {
	mu    sync.Mutex
	pipes map[[2]int]*memPipe
}

type memPipe struct {
	ch     chan memMsg
	closed chan struct{}
	once   sync.Once
}

type memMsg struct {
	data []byte
	done chan struct{}
}

var errPipeClosed = errors.New("memnet: peer closed the link")

func newMemNet() *memNet { return &memNet{pipes: make(map[[2]int]*memPipe)} }

func (n *memNet) pipe(from, to int) *memPipe {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := [2]int{from, to}
	p, ok := n.pipes[k]
	if !ok {
		p = &memPipe{ch: make(chan memMsg), closed: make(chan struct{})}
		n.pipes[k] = p
	}
	return p
}

// links returns rank's view of the network.
func (n *memNet) links(rank int) Links { return memLinks{n: n, rank: rank} }

// closeRank fails every pipe to and from rank, as a TCP transport would once
// that member's process returned: blocked peers get an error.
func (n *memNet) closeRank(rank int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, p := range n.pipes {
		if k[0] == rank || k[1] == rank {
			p.once.Do(func() { close(p.closed) })
		}
	}
}

type memLinks struct {
	n    *memNet
	rank int
}

func (l memLinks) Conn(ctx context.Context, rank int) (Conn, error) {
	if rank == l.rank {
		return nil, fmt.Errorf("memnet: rank %d dialled itself", rank)
	}
	return &memConn{out: l.n.pipe(l.rank, rank), in: l.n.pipe(rank, l.rank)}, nil
}

type memConn struct {
	out, in *memPipe
}

func (c *memConn) Send(ctx context.Context, msg []byte) error {
	m := memMsg{data: msg, done: make(chan struct{})}
	select {
	case c.out.ch <- m:
	case <-c.out.closed:
		return errPipeClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-m.done // the receiver copies right after taking the message
	return nil
}

func (c *memConn) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	select {
	case m := <-c.in.ch:
		buf = append(buf[:0], m.data...)
		close(m.done)
		return buf, nil
	case <-c.in.closed:
		return nil, errPipeClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
