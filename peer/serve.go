package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// linkReadError turns a read failure on a link into the error that ends it,
// counting and wording drops. A clean EOF is the peer closing.
func (n *Node) linkReadError(peer int, dir string, err error, timeout time.Duration) error {
	switch {
	case n.ctx.Err() != nil:
		return ErrClosed
	case errors.Is(err, io.EOF):
		return fmt.Errorf("closed by node %d", peer)
	case errors.Is(err, os.ErrDeadlineExceeded):
		n.met.dropped.WithLabelValues(dropTimeout).Inc()
		return fmt.Errorf("nothing heard from node %d for %v: %w", peer, timeout, err)
	case errors.Is(err, ErrBadFrame) || errors.Is(err, ErrFrameTooLarge) || errors.Is(err, io.ErrUnexpectedEOF):
		reason := dropReason(err)
		n.met.dropped.WithLabelValues(reason).Inc()
		n.log.Warn(fmt.Sprintf("dropped %s node %d: %v", dir, peer, explain(err, timeout)), "peer", peer, "reason", reason)
		return err
	}
	return err
}

// inLink serves the requests an authenticated peer sends on its link.
type inLink struct {
	n    *Node
	fc   *frameConn
	from int
	pc   *peerCounters
	ctx  context.Context // cancelled when the link ends; parent of handler ctxs
	stop context.CancelFunc
	sem  chan struct{} // one token per running handler

	mu      sync.Mutex                    // protects running
	running map[uint64]context.CancelFunc // handler ctx cancel by request id
}

// serveInLink takes over an authenticated inbound link connection. A newer
// link from the same peer replaces an older one (the peer restarted or
// redialled; the old socket may not have noticed yet).
func (n *Node) serveInLink(fc *frameConn, from int) {
	il := &inLink{n: n, fc: fc, from: from, pc: n.met.peer(from),
		sem: make(chan struct{}, maxInFlight), running: make(map[uint64]context.CancelFunc)}
	il.ctx, il.stop = context.WithCancel(n.ctx)
	n.mu.Lock()
	old := n.inLinks[from]
	n.inLinks[from] = il
	n.mu.Unlock()
	if old != nil {
		_ = old.fc.close()
	}
	n.log.Debug(fmt.Sprintf("link from node %d accepted", from), "peer", from)
	// The peer is back: our link to it need not wait out its backoff.
	n.mu.Lock()
	out := n.links[from]
	n.mu.Unlock()
	if out != nil {
		out.redialNow()
	}
	il.run()
}

func (il *inLink) run() {
	n := il.n
	defer func() {
		il.stop()
		n.untrack(il.fc.c)
		n.mu.Lock()
		if n.inLinks[il.from] == il {
			delete(n.inLinks, il.from)
		}
		n.mu.Unlock()
	}()
	idle := n.cfg.idleTimeout()
	for {
		_ = il.fc.c.SetReadDeadline(time.Now().Add(idle))
		h, err := il.fc.readHeader()
		if err != nil {
			il.end(n.linkReadError(il.from, "link from", err, idle))
			return
		}
		_ = il.fc.c.SetReadDeadline(time.Now().Add(n.cfg.IOTimeout))
		p, err := il.fc.readPayload(h, nil)
		if err != nil {
			il.end(n.linkReadError(il.from, "link from", err, n.cfg.IOTimeout))
			return
		}
		il.pc.received.Add(float64(headerLen + len(p)))
		switch h.typ {
		case ftPing:
			w, err := il.fc.writeFrame(ftPong, h.id)
			if err != nil {
				il.end(fmt.Errorf("send pong: %w", err))
				return
			}
			il.pc.sent.Add(float64(w))
		case ftRequest:
			if len(p) < 1 || len(p) < 1+int(p[0]) {
				il.end(n.linkReadError(il.from, "link from", fmt.Errorf("%w: truncated request kind", ErrBadFrame), 0))
				return
			}
			kind, body := string(p[1:1+int(p[0])]), p[1+int(p[0]):]
			select {
			case il.sem <- struct{}{}:
			case <-il.ctx.Done():
				return
			}
			// Register the handler's cancel before it starts, so a
			// cancel frame right behind the request finds it.
			id := h.id
			ctx, cancel := context.WithCancel(il.ctx)
			il.mu.Lock()
			il.running[id] = cancel
			il.mu.Unlock()
			if !n.goAttach(func() { il.handle(ctx, id, kind, body) }) {
				cancel()
				return
			}
		case ftCancel:
			il.mu.Lock()
			if cancel := il.running[h.id]; cancel != nil {
				cancel()
			}
			il.mu.Unlock()
		default:
			il.end(n.linkReadError(il.from, "link from", fmt.Errorf("%w: unexpected %s frame", ErrBadFrame, h.typ), 0))
			return
		}
	}
}

// end logs why an inbound link ended (unless the Node is closing).
func (il *inLink) end(err error) {
	if errors.Is(err, ErrClosed) {
		return
	}
	il.n.log.Debug(fmt.Sprintf("link from node %d ended: %v", il.from, err), "peer", il.from)
}

// handle runs one request's handler and sends its response. It owns the
// sem token and the running[id] entry.
func (il *inLink) handle(ctx context.Context, id uint64, kind string, body []byte) {
	defer func() { <-il.sem }()
	defer func() {
		il.mu.Lock()
		cancel := il.running[id]
		delete(il.running, id)
		il.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}()

	status, out := statusOK, []byte(nil)
	h := il.n.handler(kind)
	if h == nil {
		kind = "unknown" // what a peer sends adds no series
	}
	il.n.met.request(kind, "received")
	if h == nil {
		status = statusNoHandler
	} else if resp, err := h(ctx, il.from, body); err != nil {
		status, out = statusError, []byte(err.Error())
	} else {
		out = resp
	}
	if 1+len(out) > il.n.cfg.MaxFrame {
		status = statusError
		out = fmt.Appendf(nil, "response of %d bytes exceeds MaxFrame %d", len(out), il.n.cfg.MaxFrame)
	}
	w, err := il.fc.writeFrame(ftResponse, id, []byte{status}, out)
	if err != nil {
		// A half-written frame poisons the connection: drop it, the
		// peer redials.
		_ = il.fc.close()
		return
	}
	il.pc.sent.Add(float64(w))
}
