package schemes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
)

// memNet is an in-memory Links for p members: one unbuffered directed pipe
// per ordered pair. Send returns only after the receiver copied the message,
// as the strictest reading of the Conn contract, so any algorithm that could
// deadlock with a real network deadlocks here.
type memNet struct {
	mu    sync.Mutex
	pipes map[[2]int]*memPipe
	// fileConns makes its conns implement PartsSender and FileReceiver,
	// as peer streams do, so the zero-copy path's protocol runs in memory.
	fileConns bool
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
	c := &memConn{out: l.n.pipe(l.rank, rank), in: l.n.pipe(rank, l.rank)}
	if l.n.fileConns {
		return &memFileConn{c}, nil
	}
	return c, nil
}

// memFileConn is a memConn with the optional Conn extensions.
type memFileConn struct{ *memConn }

func (c *memFileConn) SendParts(ctx context.Context, parts ...[]byte) error {
	var msg []byte
	for _, p := range parts {
		msg = append(msg, p...)
	}
	return c.Send(ctx, msg)
}

func (c *memFileConn) RecvToFile(ctx context.Context, head []byte, f *os.File, off int64, n int) ([]byte, error) {
	msg, err := c.Recv(ctx, nil)
	if err != nil || len(msg) != len(head)+n {
		return msg, err
	}
	copy(head, msg)
	if _, err := f.WriteAt(msg[len(head):], off); err != nil {
		return nil, err
	}
	return head, nil
}

func (c *memFileConn) RecvParts(ctx context.Context, buf []byte, n, from, part int, fn func(lo, hi int) error) ([]byte, error) {
	msg, err := c.Recv(ctx, buf)
	if err != nil || len(msg) != n || cap(buf) < n {
		return msg, err
	}
	for lo := 0; lo < n; {
		hi := from
		if lo >= from {
			hi = lo + part
		}
		hi = min(hi, n)
		if err := fn(lo, hi); err != nil {
			return nil, err
		}
		lo = hi
	}
	return msg, nil
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
