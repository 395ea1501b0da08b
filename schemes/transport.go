package schemes

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scrfs/scrfs/internal/crc32c"
)

// Conn is an ordered, reliable message stream to one other member of the
// current operation. Send may block until the peer receives (tests use
// unbuffered transports) and must not keep msg after it returns. Recv returns
// the next message, reusing buf when it fits. The package calls Send from one
// goroutine and Recv from one goroutine at a time per Conn. Both must return
// once ctx ends, and should fail once the far end has given up on the
// operation (closed its side), so a failed member never leaves peers blocked.
type Conn interface {
	Send(ctx context.Context, msg []byte) error
	Recv(ctx context.Context, buf []byte) ([]byte, error)
}

// Links gives the streams of one operation. Conn(ctx, rank) returns the
// stream to rank (never this member's own rank); it is called at most once
// per rank per operation. Streams must be fresh per operation: a message left
// over from an earlier Encode or Rebuild would be read as part of this one.
type Links interface {
	Conn(ctx context.Context, rank int) (Conn, error)
}

// Message kinds. Every message starts with an 8-byte frame header: kind,
// three zero bytes, and a little-endian u32 tag the receiver checks (a piece
// or row number), so a desynchronised protocol fails loudly instead of
// mixing up data.
const (
	msgHello byte = iota + 1
	msgMeta
	msgData
	msgAbort
	msgDone
	// msgDataCRC is msgData whose frame carries, after the tag, the
	// little-endian CRC32C of its payload (crcFrameLen bytes in all):
	// PARTNER copies on the zero-copy path, which the receiver splices
	// into its redundancy file without seeing the bytes.
	msgDataCRC
)

const (
	frameLen    = 8
	crcFrameLen = frameLen + 4
	// abortTimeout bounds how long a failed member tries to tell each peer. A
	// peer that is not reading that link will learn from the link failing
	// instead, so waiting long buys little.
	abortTimeout = 200 * time.Millisecond
	// sendQueue is the per-link queue depth: messages an algorithm may hand
	// to a link before blocking. Deadlock freedom needs at least 1; more lets
	// a member run ahead of a slow peer.
	sendQueue = 4
)

func frame(buf []byte, kind byte, tag uint32) {
	buf[0], buf[1], buf[2], buf[3] = kind, 0, 0, 0
	binary.LittleEndian.PutUint32(buf[4:], tag)
}

// crcFrame returns a msgDataCRC frame head.
func crcFrame(tag, crc uint32) []byte {
	h := make([]byte, crcFrameLen)
	frame(h, msgDataCRC, tag)
	binary.LittleEndian.PutUint32(h[frameLen:], crc)
	return h
}

// outMsg is a message for a link's sender: buf, a framed message, or head
// followed by body (memory the caller keeps valid until done), sent without
// joining them where the Conn allows.
type outMsg struct {
	buf        []byte
	head, body []byte
	done       func() // called once Send returned, so the memory can be reused
}

type peerLink struct {
	rank int
	conn Conn
	q    chan outMsg
}

// session is one member's side of one operation: its links, one sender
// goroutine per link, the first error, and counters.
type session struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	parent context.Context
	links  Links
	rank   int
	size   int
	log    *slog.Logger

	// peersMu protects peers; it is held while dialling, so a peer is
	// connected once. errMu protects first and is never held across calls
	// out, so failing never waits on a dial.
	peersMu sync.Mutex
	peers   map[int]*peerLink
	errMu   sync.Mutex
	first   error

	zeroCopy bool // the zero-copy path is on for this operation

	wg    sync.WaitGroup // sender goroutines
	sent  atomic.Int64
	recvd atomic.Int64
	pool  sizedPool // frame + piece buffers
	// blocks holds buffers of a block of a piece (xorBlock, after frame
	// room, where the pool aligns); hot is the one this session's XOR
	// steps read contributions into, taken on first use and given back by
	// close.
	blocks sizedPool
	hot    []byte

	progress   func(done, total int64)
	total      int64 // set before data moves
	done       atomic.Int64
	progressMu sync.Mutex
	reported   int64 // progressMu protects reported
}

func newSession(ctx context.Context, links Links, rank, size, piece int, o *options) *session {
	c, cancel := context.WithCancelCause(ctx)
	return &session{
		ctx: c, cancel: cancel, parent: ctx, links: links, rank: rank, size: size,
		log: o.log, peers: make(map[int]*peerLink), pool: sizedPool{b: o.bufs, size: crcFrameLen + piece},
		blocks:   sizedPool{b: o.bufs, size: frameLen + xorBlock},
		progress: o.progress, zeroCopy: o.zeroCopyOn(),
	}
}

// path names the data path the session ran on (Result.Path): copy if it
// was off, or if a link fell back from it.
func (s *session) path() string {
	if !s.zeroCopy {
		return PathCopy
	}
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	for _, pl := range s.peers {
		if r, ok := pl.conn.(fileIOReporter); ok && r.FileIO() == "copy" {
			return PathCopy
		}
	}
	return PathZeroCopy
}

// fail records err as the session's outcome (the first one wins) and stops
// everything else the session runs.
func (s *session) fail(err error) error {
	s.errMu.Lock()
	if s.first == nil {
		s.first = err
	}
	first := s.first
	s.errMu.Unlock()
	s.cancel(first)
	return first
}

// err returns the session's first error, or the context's.
func (s *session) err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.first != nil {
		return s.first
	}
	if err := s.ctx.Err(); err != nil {
		return fmt.Errorf("redundancy operation: %w", context.Cause(s.ctx))
	}
	return nil
}

// peer returns the link to rank, connecting on first use.
func (s *session) peer(rank int) (*peerLink, error) {
	if rank == s.rank || rank < 0 || rank >= s.size {
		return nil, fmt.Errorf("internal error: link from rank %d to rank %d", s.rank, rank)
	}
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	if pl, ok := s.peers[rank]; ok {
		return pl, nil
	}
	conn, err := s.links.Conn(s.ctx, rank)
	if err != nil {
		return nil, &PeerError{Rank: rank, Err: fmt.Errorf("connect: %w", err)}
	}
	pl := &peerLink{rank: rank, conn: conn, q: make(chan outMsg, sendQueue)}
	s.peers[rank] = pl
	s.wg.Add(1)
	go s.sender(pl)
	return pl, nil
}

func (s *session) sender(pl *peerLink) {
	defer s.wg.Done()
	for {
		select {
		case m, ok := <-pl.q:
			if !ok {
				return
			}
			n, err := s.send(pl.conn, m)
			if m.done != nil {
				m.done()
			}
			if err != nil {
				s.sendFailed(pl.rank, err)
				return
			}
			s.sent.Add(int64(n))
		case <-s.ctx.Done():
			return
		}
	}
}

// sendFailed fails the session for a send to rank that failed, unless
// it fails otherwise within abortTimeout. A member that fails tells its
// peers why and then closes its links, so a send to it can fail before
// this member has read why: that reason (a corrupt file, say) is the
// outcome to report, not the closed link, and is taken if it comes.
func (s *session) sendFailed(rank int, err error) {
	t := time.NewTimer(abortTimeout)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
	case <-t.C:
		s.fail(&PeerError{Rank: rank, Err: fmt.Errorf("send: %w", err)})
	}
}

// send sends one queued message and returns its length.
func (s *session) send(conn Conn, m outMsg) (int, error) {
	if m.body == nil {
		return len(m.buf), conn.Send(s.ctx, m.buf)
	}
	n := len(m.head) + len(m.body)
	if ps, ok := conn.(PartsSender); ok && s.zeroCopy {
		return n, ps.SendParts(s.ctx, m.head, m.body)
	}
	buf := s.pool.get(n)
	defer s.pool.put(buf)
	copy(buf, m.head)
	copy(buf[len(m.head):], m.body)
	return n, conn.Send(s.ctx, buf)
}

// enqueueParts hands head+body to the link's sender, like enqueue.
func (s *session) enqueueParts(to int, head, body []byte, done func()) error {
	return s.enqueueMsg(to, outMsg{head: head, body: body, done: done})
}

// enqueue hands a framed message to the link's sender. done (may be nil)
// runs once the message has left buf.
func (s *session) enqueue(to int, buf []byte, done func()) error {
	return s.enqueueMsg(to, outMsg{buf: buf, done: done})
}

func (s *session) enqueueMsg(to int, m outMsg) error {
	pl, err := s.peer(to)
	if err != nil {
		return s.fail(err)
	}
	select {
	case pl.q <- m:
		return nil
	case <-s.ctx.Done():
		return s.err()
	}
}

// sendControl frames a copy of payload and queues it.
func (s *session) sendControl(to int, kind byte, payload []byte) error {
	buf := make([]byte, frameLen+len(payload))
	frame(buf, kind, 0)
	copy(buf[frameLen:], payload)
	return s.enqueue(to, buf, nil)
}

// recv returns the next message from rank from, which must be of the given
// kind and tag and (if want >= 0) carry want payload bytes. The returned
// slice includes the frame; buf is reused when it fits.
func (s *session) recv(from int, kind byte, tag uint32, buf []byte, want int) ([]byte, error) {
	pl, err := s.peer(from)
	if err != nil {
		return nil, s.fail(err)
	}
	msg, err := pl.conn.Recv(s.ctx, buf)
	return s.checkRecv(from, msg, err, kind, tag, want)
}

// checkRecv checks a received message as recv describes.
func (s *session) checkRecv(from int, msg []byte, err error, kind byte, tag uint32, want int) ([]byte, error) {
	if err != nil {
		if s.ctx.Err() != nil {
			return nil, s.err()
		}
		return nil, s.fail(&PeerError{Rank: from, Err: fmt.Errorf("receive: %w", err)})
	}
	s.recvd.Add(int64(len(msg)))
	bad := func(format string, args ...any) ([]byte, error) {
		return nil, s.fail(&PeerError{Rank: from, Err: fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)})
	}
	if len(msg) < frameLen {
		return bad("message of %d bytes", len(msg))
	}
	if msg[0] == msgAbort {
		return nil, s.fail(&PeerError{Rank: from, Err: decodeAbort(msg[frameLen:])})
	}
	if msg[0] == msgDataCRC && kind == msgData && len(msg) >= crcFrameLen {
		// A zero-copy sender's copy reaching a receiver that copies: check
		// the sender's CRC here and hand on a plain msgData.
		sum := binary.LittleEndian.Uint32(msg[frameLen:])
		if got := crc32c.Checksum(msg[crcFrameLen:]); got != sum {
			return nil, s.fail(&PeerError{Rank: from, Err: fmt.Errorf("%w: piece %d: crc32c %08x, sender computed %08x", ErrCorrupt, tag, got, sum)})
		}
		t := binary.LittleEndian.Uint32(msg[4:])
		msg = msg[crcFrameLen-frameLen:]
		frame(msg, msgData, t)
	}
	if got := binary.LittleEndian.Uint32(msg[4:]); msg[0] != kind || got != tag {
		return bad("got message kind %d tag %d, want kind %d tag %d", msg[0], got, kind, tag)
	}
	if want >= 0 && len(msg)-frameLen != want {
		return bad("kind %d tag %d carries %d bytes, want %d", kind, tag, len(msg)-frameLen, want)
	}
	return msg, nil
}

// exchange sends payloads[r] to every rank r in to and receives one message
// of the same kind from every rank in from; sends are queued first, so the
// pattern cannot deadlock whatever order the peers receive in.
func (s *session) exchange(kind byte, payloads map[int][]byte, from []int) (map[int][]byte, error) {
	to := make([]int, 0, len(payloads))
	for r := range payloads {
		to = append(to, r)
	}
	sort.Ints(to)
	for _, r := range to {
		if err := s.sendControl(r, kind, payloads[r]); err != nil {
			return nil, err
		}
	}
	out := make(map[int][]byte, len(from))
	for _, r := range from {
		msg, err := s.recv(r, kind, 0, nil, -1)
		if err != nil {
			return nil, err
		}
		out[r] = msg[frameLen:]
	}
	return out, nil
}

// others returns every rank but this member's.
func (s *session) others() []int {
	out := make([]int, 0, s.size-1)
	for r := 0; r < s.size; r++ {
		if r != s.rank {
			out = append(out, r)
		}
	}
	return out
}

// barrier tells every peer this member finished and waits for theirs, so
// Encode and Rebuild succeed only if the whole set did.
func (s *session) barrier() error {
	payloads := make(map[int][]byte)
	for _, r := range s.others() {
		payloads[r] = nil
	}
	_, err := s.exchange(msgDone, payloads, s.others())
	return err
}

// close ends the session. On success it lets queued messages drain; on
// failure it stops the senders and tells every peer it talked to why, so
// members blocked on this one fail promptly with a PeerError.
func (s *session) close(err error) {
	defer func() {
		s.blocks.put(s.hot)
		s.hot = nil
	}()
	if err == nil {
		s.peersMu.Lock()
		for _, pl := range s.peers {
			close(pl.q)
		}
		s.peersMu.Unlock()
		s.wg.Wait()
		s.cancel(nil)
		return
	}
	err = s.fail(err)
	s.wg.Wait()
	msg := encodeAbort(s.rank, err)
	var wg sync.WaitGroup
	for _, r := range s.others() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(s.parent), abortTimeout)
			defer cancel()
			// Peers this member never talked to are told too: they may be
			// waiting for its first message.
			s.peersMu.Lock()
			pl, ok := s.peers[r]
			s.peersMu.Unlock()
			var conn Conn
			if ok {
				conn = pl.conn
			} else {
				c, e := s.links.Conn(ctx, r)
				if e != nil {
					s.log.Debug("abort not delivered", "peer", r, "err", e)
					return
				}
				conn = c
			}
			if e := conn.Send(ctx, msg); e != nil {
				s.log.Debug("abort not delivered", "peer", r, "err", e)
			}
		}()
	}
	wg.Wait()
}

func encodeAbort(rank int, err error) []byte {
	text := fmt.Sprintf("rank %d: %v", rank, err)
	code := codeOf(err)
	buf := make([]byte, frameLen+len(code)+1+len(text))
	frame(buf, msgAbort, 0)
	n := copy(buf[frameLen:], code)
	buf[frameLen+n] = 0
	copy(buf[frameLen+n+1:], text)
	return buf
}

func decodeAbort(b []byte) error {
	code, text := "", string(b)
	for i, c := range b {
		if c == 0 {
			code, text = string(b[:i]), string(b[i+1:])
			break
		}
	}
	if sentinel := errOfCode(code); sentinel != nil {
		return fmt.Errorf("%w (%w): %s", ErrAborted, sentinel, text)
	}
	return fmt.Errorf("%w: %s", ErrAborted, text)
}

// addProgress reports n more bytes of work done. Calls are serialised and
// never report less than before, whichever goroutine did the work.
func (s *session) addProgress(n int64) {
	if s.progress == nil || n == 0 {
		return
	}
	done := s.done.Add(n)
	s.progressMu.Lock()
	defer s.progressMu.Unlock()
	if done > s.reported {
		s.reported = done
		s.progress(done, s.total)
	}
}
