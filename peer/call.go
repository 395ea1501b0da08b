package peer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Response status byte: the first payload byte of a ftResponse frame.
const (
	statusOK        byte = 0 // body follows
	statusError     byte = 1 // handler error text follows
	statusNoHandler byte = 2 // no handler for the kind
)

// maxInFlight bounds the requests outstanding on one link. The caller's side
// waits for a slot before sending, and frees it only when the response
// arrives (not when the caller gives up), so the serving side never has more
// handlers of this link running: its reader never has to stop reading, and
// pings keep being answered however slow the handlers are. A peer that
// ignores the limit finds the server's reader stalled (bounding our memory to
// maxInFlight requests) and eventually loses its link.
const maxInFlight = 32

// Call sends req to node to as a request of the given kind and returns the
// handler's response. The link is dialled on first use and kept afterwards;
// while it is down, Call waits for it to come back (the link redials with
// backoff) until ctx ends. A handler error comes back as a *RemoteError. If
// the link drops after the request was sent, the error wraps ErrConnLost and
// the handler may or may not have run. At most 32 requests per peer are in
// flight; further Calls wait for a slot. req is not retained after Call
// returns.
func (n *Node) Call(ctx context.Context, to int, kind string, req []byte) ([]byte, error) {
	if len(kind) > maxNameLen {
		return nil, fmt.Errorf("call node %d: kind %.20q... is longer than %d bytes", to, kind, maxNameLen)
	}
	if 1+len(kind)+len(req) > n.cfg.MaxFrame {
		return nil, fmt.Errorf("call node %d %s: request of %d bytes: %w (MaxFrame %d)", to, kind, len(req), ErrFrameTooLarge, n.cfg.MaxFrame)
	}
	l, err := n.linkTo(to)
	if err != nil {
		return nil, fmt.Errorf("call node %d %s: %w", to, kind, err)
	}
	for {
		cc, err := l.wait(ctx)
		if err != nil {
			return nil, fmt.Errorf("call node %d %s: %w", to, kind, err)
		}
		resp, sent, err := cc.call(ctx, kind, req)
		if err == nil {
			return resp, nil
		}
		var re *RemoteError
		if errors.As(err, &re) {
			return nil, err
		}
		if sent || ctx.Err() != nil {
			return nil, fmt.Errorf("call node %d %s: %w", to, kind, err)
		}
		// The connection broke before the whole request left, so the
		// peer cannot have run it: wait for the link and send again.
	}
}

type callResult struct {
	body []byte
	err  error
}

// clientConn is one authenticated outbound link connection: requests and
// pings go out, responses and pongs come back.
type clientConn struct {
	l    *link
	fc   *frameConn
	addr string
	pc   *peerCounters
	done chan struct{} // closed by close
	// slots holds one token per request in flight (see maxInFlight).
	slots chan struct{}

	nextID atomic.Uint64

	mu sync.Mutex // protects the fields below
	// err is why the connection ended; set once by close.
	err error
	// pending maps request ids to their caller's channel; nil for a caller
	// that gave up (the entry stays until the response frees its slot).
	pending  map[uint64]chan callResult
	pingID   uint64
	pingSent time.Time
}

func newClientConn(l *link, fc *frameConn, addr string) *clientConn {
	return &clientConn{
		l:       l,
		fc:      fc,
		addr:    addr,
		pc:      l.n.met.peer(l.peer),
		done:    make(chan struct{}),
		slots:   make(chan struct{}, maxInFlight),
		pending: make(map[uint64]chan callResult),
	}
}

func (cc *clientConn) isDone() bool {
	select {
	case <-cc.done:
		return true
	default:
		return false
	}
}

// close ends the connection with err (first call wins) and fails pending
// calls with ErrConnLost.
func (cc *clientConn) close(err error) {
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return
	}
	cc.err = err
	pending := cc.pending
	cc.pending = nil
	close(cc.done)
	cc.mu.Unlock()
	_ = cc.fc.close()
	for _, ch := range pending {
		if ch != nil {
			ch <- callResult{err: fmt.Errorf("%w: %v", ErrConnLost, err)}
		}
	}
}

// run serves the connection until it fails: this goroutine reads, a second
// one sends heartbeats. It returns why the connection ended.
func (cc *clientConn) run() error {
	if !cc.l.n.goAttach(cc.heartbeat) {
		cc.close(ErrClosed)
		return ErrClosed
	}
	cc.close(cc.readLoop())
	return cc.err
}

func (cc *clientConn) readLoop() error {
	cfg := &cc.l.n.cfg
	idle := cfg.idleTimeout()
	for {
		_ = cc.fc.c.SetReadDeadline(time.Now().Add(idle))
		h, err := cc.fc.readHeader()
		if err != nil {
			return cc.l.n.linkReadError(cc.l.peer, "link to", err, idle)
		}
		_ = cc.fc.c.SetReadDeadline(time.Now().Add(cfg.IOTimeout))
		p, err := cc.fc.readPayload(h, nil)
		if err != nil {
			return cc.l.n.linkReadError(cc.l.peer, "link to", err, cfg.IOTimeout)
		}
		cc.pc.received.Add(float64(headerLen + len(p)))
		switch h.typ {
		case ftResponse:
			if len(p) == 0 {
				return cc.l.n.linkReadError(cc.l.peer, "link to", fmt.Errorf("%w: empty response", ErrBadFrame), 0)
			}
			cc.deliver(h.id, p)
		case ftPong:
			cc.mu.Lock()
			if h.id == cc.pingID && !cc.pingSent.IsZero() {
				rtt := time.Since(cc.pingSent)
				cc.pingSent = time.Time{}
				cc.l.mu.Lock()
				cc.l.st.RTT = rtt
				cc.l.mu.Unlock()
			}
			cc.mu.Unlock()
		default:
			return cc.l.n.linkReadError(cc.l.peer, "link to", fmt.Errorf("%w: unexpected %s frame", ErrBadFrame, h.typ), 0)
		}
	}
}

// deliver hands a response to its waiting call and frees the request's
// slot; a response nobody waits for (the caller gave up) is dropped.
func (cc *clientConn) deliver(id uint64, p []byte) {
	cc.mu.Lock()
	ch, ok := cc.pending[id]
	delete(cc.pending, id)
	cc.mu.Unlock()
	if !ok {
		return
	}
	<-cc.slots
	if ch == nil {
		return
	}
	var r callResult
	switch p[0] {
	case statusOK:
		r.body = p[1:]
	case statusNoHandler:
		r.err = &RemoteError{Peer: cc.l.peer, Msg: "no handler registered", noHandler: true}
	default:
		r.err = &RemoteError{Peer: cc.l.peer, Msg: string(p[1:])}
	}
	ch <- r
}

// heartbeat pings every Config.Heartbeat, starting at once so the RTT is
// known early. The read deadline in readLoop detects a silent peer.
func (cc *clientConn) heartbeat() {
	t := time.NewTicker(cc.l.n.cfg.Heartbeat)
	defer t.Stop()
	for seq := uint64(1); ; seq++ {
		cc.mu.Lock()
		cc.pingID, cc.pingSent = seq, time.Now()
		cc.mu.Unlock()
		w, err := cc.fc.writeFrame(ftPing, seq)
		if err != nil {
			cc.close(fmt.Errorf("send heartbeat: %w", err))
			return
		}
		cc.pc.sent.Add(float64(w))
		select {
		case <-cc.done:
			return
		case <-t.C:
		}
	}
}

// call sends one request and waits for its response. sent reports whether
// the request may have reached the peer (false only if the write failed, in
// which case the peer saw at most a truncated frame and ran nothing).
func (cc *clientConn) call(ctx context.Context, kind string, req []byte) (resp []byte, sent bool, err error) {
	select {
	case cc.slots <- struct{}{}:
	case <-cc.done:
		return nil, false, cc.closeErr()
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	id := cc.nextID.Add(1)
	ch := make(chan callResult, 1)
	cc.mu.Lock()
	if cc.err != nil {
		err := cc.err
		cc.mu.Unlock()
		return nil, false, err
	}
	cc.pending[id] = ch
	cc.mu.Unlock()

	kb := make([]byte, 1+len(kind))
	kb[0] = byte(len(kind))
	copy(kb[1:], kind)
	w, err := cc.fc.writeFrame(ftRequest, id, kb, req)
	if err != nil {
		cc.close(fmt.Errorf("send request: %w", err))
		return nil, false, err
	}
	cc.pc.sent.Add(float64(w))
	cc.l.n.met.request(kind, "sent")
	select {
	case r := <-ch:
		return cc.result(r, kind)
	case <-ctx.Done():
		cc.mu.Lock()
		if _, ok := cc.pending[id]; ok {
			cc.pending[id] = nil // keep the slot until the response comes
		}
		cc.mu.Unlock()
		// Tell the peer to cancel the handler's ctx; best effort.
		cc.l.n.goAttach(func() { _, _ = cc.fc.writeFrame(ftCancel, id) })
		return nil, true, ctx.Err()
	}
}

func (cc *clientConn) closeErr() error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.err
}

func (cc *clientConn) result(r callResult, kind string) ([]byte, bool, error) {
	var re *RemoteError
	if errors.As(r.err, &re) {
		re.Kind = kind
	}
	return r.body, true, r.err
}
