package jobnet

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Streams between two parts of one node (a node that plays two members of
// a set, rebuilding a lost member's share beside its own) never touch the
// network: OpenStream and AcceptStream to this node's own index meet in a
// table of the Mux and are joined by an in-process pipe.

// localStreams is the rendezvous of a Mux's streams to itself.
type localStreams struct {
	mu      sync.Mutex
	waiting map[string]chan *localEnd // accepts waiting, by id
	held    map[string]*localEnd      // opens not yet accepted, by id
}

// localDepth is how many messages one direction of a local stream
// buffers, as a socket would.
const localDepth = 4

// errLocalClosed is returned by a local stream whose other end closed.
var errLocalClosed = errors.New("local stream closed")

// localEnd is one end of a local stream.
type localEnd struct {
	in, out *localQueue
}

type localQueue struct {
	ch     chan []byte
	closed chan struct{}
	once   sync.Once
}

func newLocalQueue() *localQueue {
	return &localQueue{ch: make(chan []byte, localDepth), closed: make(chan struct{})}
}

func (q *localQueue) close() { q.once.Do(func() { close(q.closed) }) }

func (e *localEnd) Send(ctx context.Context, msg []byte) error {
	select {
	case <-e.in.closed:
		return errLocalClosed
	default:
	}
	select {
	case e.out.ch <- append([]byte(nil), msg...):
		return nil
	case <-e.in.closed:
		return errLocalClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *localEnd) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	select {
	case m := <-e.in.ch:
		return append(buf[:0], m...), nil
	case <-e.in.closed:
		select {
		case m := <-e.in.ch:
			return append(buf[:0], m...), nil
		default:
			return nil, errLocalClosed
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close ends this side: the other end's Recv gets what was sent, then an
// error; its Send fails at once.
func (e *localEnd) Close() error {
	e.out.close()
	return nil
}

// open makes stream id and waits for nothing: the accept may come later.
func (l *localStreams) open(id string) (Stream, error) {
	ab, ba := newLocalQueue(), newLocalQueue()
	mine, theirs := &localEnd{in: ba, out: ab}, &localEnd{in: ab, out: ba}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.waiting[id]; w != nil {
		delete(l.waiting, id)
		w <- theirs
		return mine, nil
	}
	if l.held[id] != nil {
		return nil, fmt.Errorf("local stream %s: duplicate stream id", id)
	}
	if l.held == nil {
		l.held = map[string]*localEnd{}
	}
	l.held[id] = theirs
	return mine, nil
}

// accept waits for stream id to be opened, until ctx ends.
func (l *localStreams) accept(ctx context.Context, id string) (Stream, error) {
	l.mu.Lock()
	if e := l.held[id]; e != nil {
		delete(l.held, id)
		l.mu.Unlock()
		return e, nil
	}
	if l.waiting[id] != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("local stream %s: duplicate stream id", id)
	}
	if l.waiting == nil {
		l.waiting = map[string]chan *localEnd{}
	}
	w := make(chan *localEnd, 1)
	l.waiting[id] = w
	l.mu.Unlock()
	select {
	case e := <-w:
		return e, nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	if l.waiting[id] == w {
		delete(l.waiting, id)
	}
	l.mu.Unlock()
	select {
	case e := <-w: // opened just as we gave up
		e.in.close()
		e.out.close()
	default:
	}
	return nil, fmt.Errorf("local stream %s: %w", id, ctx.Err())
}
