package peer

import (
	"errors"
	"fmt"
)

// Sentinel errors that callers test with errors.Is.
var (
	// ErrClosed is returned by every operation on a Node after Close, and by
	// Stream operations after the Stream or its Node was closed.
	ErrClosed = errors.New("peer: node closed")

	// ErrBadFrame means the bytes on a connection are not a valid frame
	// (bad magic, unknown type, malformed payload). The connection is dropped.
	ErrBadFrame = errors.New("malformed frame")

	// ErrFrameTooLarge means a frame exceeds the configured maximum, on
	// receipt (the connection is dropped) or on Send/Call (nothing is sent).
	ErrFrameTooLarge = errors.New("frame too large")

	// ErrBadHello means a handshake message could not be parsed.
	ErrBadHello = errors.New("malformed hello")

	// ErrTerms means the two ends run the job with different terms
	// (Config.Terms: scheme, parameters, number of nodes).
	ErrTerms = errors.New("the job's terms differ")
	// ErrVersion means the two ends speak different protocol versions.
	ErrVersion = errors.New("protocol version mismatch")

	// ErrAuth means the other end could not prove it holds the job secret.
	ErrAuth = errors.New("authentication failed (wrong job secret?)")

	// ErrRefused is wrapped by a *RefusedError: the peer refused our
	// handshake (see its Reason).
	ErrRefused = errors.New("connection refused by peer")

	// ErrUnknownPeer means a node index is out of range, is this node's own,
	// or has no known address.
	ErrUnknownPeer = errors.New("unknown peer")

	// ErrConnLost means the link to a peer broke after a request was sent:
	// the handler may or may not have run. Only idempotent requests should
	// be retried.
	ErrConnLost = errors.New("connection lost")

	// ErrNoHandler is wrapped by a *RemoteError when the peer has no handler
	// for the request kind.
	ErrNoHandler = errors.New("no handler for request kind")

	// ErrDuplicateStream means a stream with the same (peer, id) is already
	// being waited for or held.
	ErrDuplicateStream = errors.New("duplicate stream id")

	// ErrStreamBroken means an earlier Send or Recv on the stream failed or
	// was cancelled mid-frame; the stream must be closed.
	ErrStreamBroken = errors.New("stream broken by an earlier error")
)

// RefusedError is returned when a peer refuses our handshake. Reason is the
// peer's explanation, as it logged it (e.g. "authentication failed (wrong job
// secret?)").
type RefusedError struct {
	Peer   int    // index of the node we dialled
	Addr   string // address we dialled
	Code   uint8  // refusal code from the verdict (refuse* constants)
	Reason string // human-readable reason sent by the peer
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("node %d at %s refused us: %s", e.Peer, e.Addr, e.Reason)
}

// Unwrap lets errors.Is match ErrRefused and, for an authentication or
// version refusal, ErrAuth or ErrVersion.
func (e *RefusedError) Unwrap() []error {
	switch e.Code {
	case refuseAuth:
		return []error{ErrRefused, ErrAuth}
	case refuseVersion:
		return []error{ErrRefused, ErrVersion}
	case refuseDuplicate:
		return []error{ErrRefused, ErrDuplicateStream}
	case refuseTerms:
		return []error{ErrRefused, ErrTerms}
	}
	return []error{ErrRefused}
}

// RemoteError is a Call's error when the peer's handler returned an error (or
// had no handler). Msg is the handler's error text; the original error value
// does not cross the network.
type RemoteError struct {
	Peer int    // node that ran the handler
	Kind string // request kind
	Msg  string // the handler's error string
	// noHandler is set when the peer had no handler for Kind.
	noHandler bool
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("node %d %s: %s", e.Peer, e.Kind, e.Msg)
}

// Unwrap returns ErrNoHandler when the peer had no handler for the kind.
func (e *RemoteError) Unwrap() error {
	if e.noHandler {
		return ErrNoHandler
	}
	return nil
}
