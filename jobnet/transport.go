package jobnet

import (
	"context"
	"errors"
)

// Stream is an ordered, reliable message stream to one other node, opened
// for one bulk transfer. One goroutine may Send while another Recvs. The
// opener and the acceptor each Close their end.
type Stream interface {
	// Send sends one message; msg is not retained after it returns.
	Send(ctx context.Context, msg []byte) error
	// Recv returns the next message, reusing buf when it fits.
	Recv(ctx context.Context, buf []byte) ([]byte, error)
	Close() error
}

// RawHandler serves one request kind at the byte level; Mux.Serve is the
// only one a Transport ever needs.
type RawHandler func(ctx context.Context, from int, kind string, req []byte) ([]byte, error)

// Transport is one node's end of the job's network.
type Transport interface {
	// Call sends req to node to and returns the answer. While the link to
	// to is down, Call waits for it until ctx ends. An error wrapping
	// ErrConnLost means the request left and the link broke: the handler
	// may or may not have run.
	Call(ctx context.Context, to int, kind string, req []byte) ([]byte, error)
	// OpenStream opens stream id to node to, which receives it with
	// AcceptStream(ctx, self, id).
	OpenStream(ctx context.Context, to int, id string) (Stream, error)
	// AcceptStream waits for node from to open stream id.
	AcceptStream(ctx context.Context, from int, id string) (Stream, error)
	// WaitUp waits until the links to every node of peers are up at once.
	WaitUp(ctx context.Context, peers []int) error
	// OnLinkChange registers f to hear of links going up and down. f must
	// not block.
	OnLinkChange(f func(peer int, up bool))
	// Reach reports whether the link to peer is up (a call to it would
	// not wait for the link). A peer this node has no link to yet is
	// dialled and Reach waits for that first attempt, until ctx ends: a
	// fan-out passes through nodes beyond a node's own set. A link tried
	// and down is reported at once.
	Reach(ctx context.Context, peer int) bool
}

// ErrConnLost is wrapped by Transport errors after which the far end may
// or may not have run the request.
var ErrConnLost = errors.New("connection lost")

// ErrNoTransport is returned for a call to another node in a job that has
// no network (one node).
var ErrNoTransport = errors.New("no peer links in a job of one node")
