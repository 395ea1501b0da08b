package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// maxHeldStreams bounds streams dialled before their AcceptStream, so a
// peer cannot pile up unclaimed connections.
const maxHeldStreams = 256

// streamBuffer is the socket buffer size asked for on stream connections.
// (Linux caps it at net.core.[rw]mem_max and disables autotuning for the
// socket; see the comment in tuneStream.)
const streamBuffer = 4 << 20

// streamKey names a stream on the accepting side: who opened it, and the id
// both sides agreed on.
type streamKey struct {
	peer int
	id   string
}

// heldStream is a stream that arrived before its AcceptStream.
type heldStream struct {
	s     *Stream
	timer *time.Timer // drops the stream after Config.StreamHold
}

// Stream is a dedicated authenticated connection to one peer for bulk
// transfer, carrying frames in both directions. One goroutine may Send while
// another Recvs; concurrent Sends (or Recvs) are serialised. A Send or Recv
// that fails or is cancelled mid-frame breaks the stream (later calls return
// ErrStreamBroken): Close it. The caller owns the Stream and must Close it;
// closing the Node closes it too.
type Stream struct {
	n    *Node
	peer int
	id   string
	fc   *frameConn
	pc   *peerCounters

	closed atomic.Bool

	// rmu serialises Recv and protects rerr; fc.wmu serialises Send and
	// protects werr.
	rmu  sync.Mutex
	rerr error
	rw   ctxWatch
	werr error
	ww   ctxWatch

	// pipe carries spliced payloads (RecvToFile): read end, write end, or
	// nil before the first; rmu protects it.
	pipe []int
	// spliced and copied record which file data paths the stream used
	// (FileIO).
	spliced, copied atomic.Bool
	// lowat is the socket's SO_RCVLOWAT as last set (0: the default, 1);
	// rmu protects it.
	lowat int
}

func newStream(n *Node, fc *frameConn, peer int, id string) *Stream {
	tuneStream(fc.c)
	return &Stream{
		n: n, peer: peer, id: id, fc: fc, pc: n.met.peer(peer),
		rw: ctxWatch{c: fc.c, read: true},
		ww: ctxWatch{c: fc.c},
	}
}

// tuneStream asks for large socket buffers so a 1 MiB frame does not stall
// on a small window. On Linux an explicit size turns off autotuning, yet on
// loopback it measured 10-50% faster than autotuning (BenchmarkStream) since
// the window starts large; the kernel caps it at net.core.[rw]mem_max.
// Errors are harmless: the defaults still work.
func tuneStream(c *net.TCPConn) {
	_ = c.SetReadBuffer(streamBuffer)
	_ = c.SetWriteBuffer(streamBuffer)
}

// Peer returns the index of the node at the other end.
func (s *Stream) Peer() int { return s.peer }

// ID returns the stream id given to OpenStream/AcceptStream.
func (s *Stream) ID() string { return s.id }

// OpenStream dials node to and opens the stream id, which the peer receives
// with AcceptStream(ctx, self, id). It returns once the peer has
// authenticated the connection, without waiting for the peer's
// AcceptStream (so two nodes may each open a stream to the other before
// accepting, as a ring does); the peer holds it for Config.StreamHold. Dial
// failures and refusals are retried with backoff until ctx ends, except a
// duplicate id. id must be 1 to 255 bytes.
func (n *Node) OpenStream(ctx context.Context, to int, id string) (*Stream, error) {
	if id == "" || len(id) > maxNameLen {
		return nil, fmt.Errorf("open stream to node %d: id must be 1 to %d bytes", to, maxNameLen)
	}
	if to < 0 || to >= len(n.cfg.Addrs) || to == n.cfg.Self {
		return nil, fmt.Errorf("open stream %q to node %d: %w (self %d, %d nodes)", id, to, ErrUnknownPeer, n.cfg.Self, len(n.cfg.Addrs))
	}
	b := redialBackoff(n.cfg.MaxBackoff)
	var lastErr error
	for {
		// Re-read the address each try: the peer may move meanwhile.
		addr, err := n.addr(to)
		var fc *frameConn
		if err == nil {
			fc, err = n.dial(ctx, to, addr, purposeStream, id)
		}
		if err == nil {
			return newStream(n, fc, to, id), nil
		}
		if cause := cutShort(ctx); cause != nil && lastErr != nil {
			// This try was cut short; the previous one says why the
			// stream could not open.
			return nil, fmt.Errorf("open stream %q to node %d: %w (last error: %w)", id, to, cause, lastErr)
		}
		if errors.Is(err, ErrClosed) || errors.Is(err, ErrDuplicateStream) || ctx.Err() != nil {
			return nil, fmt.Errorf("open stream %q to node %d: %w", id, to, err)
		}
		if lastErr == nil || err.Error() != lastErr.Error() {
			n.log.Warn(fmt.Sprintf("open stream %q: %v (retrying)", id, err), "peer", to, "stream", id)
		}
		lastErr = err
		t := time.NewTimer(b.Next())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("open stream %q to node %d: %w (last error: %w)", id, to, ctx.Err(), err)
		case <-n.ctx.Done():
			t.Stop()
			return nil, ErrClosed
		}
	}
}

// cutShort returns why ctx ended the try just made (nil while it has time
// left). A dial or handshake bounded by ctx's deadline fails with a
// timeout when the deadline passes, which can be a moment before ctx
// itself reports that it ended: the two timers fire apart, the more so on
// a loaded machine.
func cutShort(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// AcceptStream waits for node from to open the stream id and returns it. A
// stream that arrived before the call is returned at once (if it arrived
// within Config.StreamHold). Only one AcceptStream may wait for a given
// (from, id).
func (n *Node) AcceptStream(ctx context.Context, from int, id string) (*Stream, error) {
	key := streamKey{from, id}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	if h := n.held[key]; h != nil {
		delete(n.held, key)
		h.timer.Stop()
		n.mu.Unlock()
		return h.s, nil
	}
	if n.waiters[key] != nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("accept stream %q from node %d: %w", id, from, ErrDuplicateStream)
	}
	ch := make(chan *Stream, 1)
	n.waiters[key] = ch
	n.mu.Unlock()

	var err error
	select {
	case s := <-ch:
		return s, nil
	case <-ctx.Done():
		err = fmt.Errorf("accept stream %q from node %d: %w", id, from, ctx.Err())
	case <-n.ctx.Done():
		err = ErrClosed
	}
	n.mu.Lock()
	if n.waiters[key] == ch {
		delete(n.waiters, key)
	}
	n.mu.Unlock()
	// offerStream may have delivered between the wakeup and the delete.
	select {
	case s := <-ch:
		_ = s.Close()
	default:
	}
	return nil, err
}

// streamRoom decides, before accepting a stream's handshake, whether it can
// be taken: not a duplicate of a held stream, and not over the held limit.
func (n *Node) streamRoom(key streamKey) (uint8, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
		return refuseClosing, "node is shutting down"
	case n.held[key] != nil:
		return refuseDuplicate, fmt.Sprintf("stream %q from node %d is already waiting to be accepted", key.id, key.peer)
	case n.waiters[key] == nil && len(n.held) >= maxHeldStreams:
		return refuseBusy, fmt.Sprintf("%d streams already waiting to be accepted", len(n.held))
	}
	return verdictAccept, ""
}

// offerStream hands an authenticated stream connection to its waiting
// AcceptStream, or holds it until one comes (or StreamHold passes).
func (n *Node) offerStream(fc *frameConn, from int, id string) {
	s := newStream(n, fc, from, id)
	key := streamKey{from, id}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		_ = s.Close()
		return
	}
	if ch := n.waiters[key]; ch != nil {
		delete(n.waiters, key)
		n.mu.Unlock()
		ch <- s
		return
	}
	if n.held[key] != nil || len(n.held) >= maxHeldStreams {
		n.mu.Unlock()
		n.met.dropped.WithLabelValues(dropBusy).Inc()
		n.log.Warn(fmt.Sprintf("dropped stream %q from node %d: duplicate or too many waiting", id, from), "peer", from, "stream", id)
		_ = s.Close()
		return
	}
	h := &heldStream{s: s}
	h.timer = time.AfterFunc(n.cfg.StreamHold, func() { n.expireHeld(key, h) })
	n.held[key] = h
	n.mu.Unlock()
}

// expireHeld drops a held stream nobody accepted in time.
func (n *Node) expireHeld(key streamKey, h *heldStream) {
	n.mu.Lock()
	if n.held[key] != h {
		n.mu.Unlock()
		return
	}
	delete(n.held, key)
	n.mu.Unlock()
	n.met.dropped.WithLabelValues(dropUnclaimed).Inc()
	n.log.Warn(fmt.Sprintf("dropped stream %q from node %d: not accepted within %v (StreamHold)", key.id, key.peer, n.cfg.StreamHold),
		"peer", key.peer, "stream", key.id)
	_ = h.s.Close()
}

// Send sends b as one frame. b is not retained. It fails with
// ErrFrameTooLarge (stream intact) if len(b) exceeds MaxFrame, and breaks the
// stream if the peer does not take the frame within IOTimeout or ctx ends
// mid-frame.
func (s *Stream) Send(ctx context.Context, b []byte) error {
	return s.send(ctx, len(b), func() (int, error) { return s.fc.writeFrameLocked(ftData, 0, b) })
}

// Recv returns the next frame, read into buf when it fits (else into a new
// slice); the result is valid until buf is reused. It returns io.EOF when the
// peer closed the stream between frames.
func (s *Stream) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	h, err := s.recvHeaderLocked(ctx)
	if err != nil {
		return nil, err
	}
	return s.recvPayloadLocked(ctx, h, buf)
}

// recvHeaderLocked starts a Recv: it reads the next frame's header (a data
// frame) with the IOTimeout deadline, then extends the deadline for the
// payload. The caller holds rmu.
func (s *Stream) recvHeaderLocked(ctx context.Context) (header, error) {
	if s.rerr != nil {
		return header{}, s.rerr
	}
	if err := s.rw.begin(ctx, time.Now().Add(s.n.cfg.IOTimeout)); err != nil {
		return header{}, s.fail(&s.rerr, "recv", err, false)
	}
	h, err := s.fc.readHeader()
	if err == nil && h.typ != ftData {
		err = fmt.Errorf("%w: unexpected %s frame on a stream", ErrBadFrame, h.typ)
	}
	if err != nil {
		if errors.Is(err, io.EOF) && !s.closed.Load() {
			s.rerr = io.EOF
			return header{}, io.EOF
		}
		return header{}, s.fail(&s.rerr, "recv", s.cause(ctx, &s.rw, err), true)
	}
	s.rw.extend(time.Now().Add(s.n.cfg.IOTimeout))
	return h, nil
}

// recvPayloadLocked reads h's payload into buf when it fits.
func (s *Stream) recvPayloadLocked(ctx context.Context, h header, buf []byte) ([]byte, error) {
	p, err := s.fc.readPayload(h, buf)
	if err != nil {
		return nil, s.fail(&s.rerr, "recv", s.cause(ctx, &s.rw, err), true)
	}
	s.pc.received.Add(float64(headerLen + len(p)))
	return p, nil
}

// cause names why an I/O call failed: the ctx, a Close, or the network.
func (s *Stream) cause(ctx context.Context, w *ctxWatch, err error) error {
	switch {
	case w.hasFired() && ctx.Err() != nil:
		return ctx.Err()
	case s.closed.Load() || s.n.isClosed():
		return ErrClosed
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.n.met.dropped.WithLabelValues(dropTimeout).Inc()
		return fmt.Errorf("no progress for %v (IOTimeout): %w", s.n.cfg.IOTimeout, err)
	case errors.Is(err, ErrBadFrame) || errors.Is(err, ErrFrameTooLarge):
		reason := dropReason(err)
		s.n.met.dropped.WithLabelValues(reason).Inc()
		s.n.log.Warn(fmt.Sprintf("dropped stream %q with node %d: %v", s.id, s.peer, err), "peer", s.peer, "stream", s.id, "reason", reason)
		_ = s.fc.close()
	}
	return err
}

// fail wraps err with the stream's identity; if broken, the stream's
// direction is poisoned so later calls fail fast.
func (s *Stream) fail(slot *error, op string, err error, broken bool) error {
	err = fmt.Errorf("stream %q with node %d: %s: %w", s.id, s.peer, op, err)
	if broken {
		*slot = fmt.Errorf("%w: %w", ErrStreamBroken, err)
	}
	return err
}

// Close closes the stream's connection; a Send or Recv in progress on
// another goroutine fails with ErrClosed. Idempotent.
func (s *Stream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.rw.release()
	s.ww.release()
	s.n.untrack(s.fc.c)
	s.closePipe()
	return nil
}
