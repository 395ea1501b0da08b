package peer

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Frame header layout (16 bytes, big endian):
//
//	[0:2]  magic 'S' 'f'
//	[2]    type
//	[3]    flags, must be 0 (reserved)
//	[4:8]  payload length
//	[8:16] id (request id on links; sequence on streams; 0 in the handshake)
const (
	headerLen   = 16
	frameMagic0 = 'S'
	frameMagic1 = 'f'

	// handshakeMaxFrame limits frames before authentication, so an
	// unauthenticated client can make us allocate at most this much.
	handshakeMaxFrame = 4 << 10
)

// frameType says what a frame carries. Each phase of a connection accepts a
// subset; anything else is garbage.
type frameType uint8

const (
	ftHello     frameType = 1 // handshake: client's hello
	ftChallenge frameType = 2 // handshake: server nonce + MAC
	ftProof     frameType = 3 // handshake: client MAC
	ftVerdict   frameType = 4 // handshake: accept or refuse + reason

	ftRequest  frameType = 16 // link: kind-length byte, kind, body
	ftResponse frameType = 17 // link: status byte, body or error text
	ftCancel   frameType = 18 // link: caller gave up on request id
	ftPing     frameType = 19 // link: heartbeat
	ftPong     frameType = 20 // link: heartbeat answer, same id

	ftData frameType = 32 // stream: one Send
)

func (t frameType) known() bool {
	switch t {
	case ftHello, ftChallenge, ftProof, ftVerdict,
		ftRequest, ftResponse, ftCancel, ftPing, ftPong, ftData:
		return true
	}
	return false
}

func (t frameType) String() string {
	switch t {
	case ftHello:
		return "hello"
	case ftChallenge:
		return "challenge"
	case ftProof:
		return "proof"
	case ftVerdict:
		return "verdict"
	case ftRequest:
		return "request"
	case ftResponse:
		return "response"
	case ftCancel:
		return "cancel"
	case ftPing:
		return "ping"
	case ftPong:
		return "pong"
	case ftData:
		return "data"
	}
	return fmt.Sprintf("type-%d", uint8(t))
}

// header is a decoded frame header.
type header struct {
	typ    frameType
	length uint32
	id     uint64
}

func putHeader(b *[headerLen]byte, h header) {
	b[0], b[1], b[2], b[3] = frameMagic0, frameMagic1, byte(h.typ), 0
	binary.BigEndian.PutUint32(b[4:8], h.length)
	binary.BigEndian.PutUint64(b[8:16], h.id)
}

// parseHeader decodes and checks a header. The length is checked against
// maxLen here, before any payload buffer exists.
func parseHeader(b *[headerLen]byte, maxLen int) (header, error) {
	if b[0] != frameMagic0 || b[1] != frameMagic1 {
		return header{}, fmt.Errorf("%w: bad magic %#02x%02x (not an scrfs peer?)", ErrBadFrame, b[0], b[1])
	}
	h := header{
		typ:    frameType(b[2]),
		length: binary.BigEndian.Uint32(b[4:8]),
		id:     binary.BigEndian.Uint64(b[8:16]),
	}
	if !h.typ.known() {
		return header{}, fmt.Errorf("%w: unknown frame type %d", ErrBadFrame, b[2])
	}
	if b[3] != 0 {
		return header{}, fmt.Errorf("%w: reserved flags %#02x set", ErrBadFrame, b[3])
	}
	if uint64(h.length) > uint64(maxLen) {
		return header{}, fmt.Errorf("%w: %s frame of %d bytes exceeds the %d-byte limit", ErrFrameTooLarge, h.typ, h.length, maxLen)
	}
	return h, nil
}

// readFrame reads one frame from r: the header into *hdr, the payload into
// buf when it fits (else a new slice of exactly the payload's length). It
// returns io.EOF only when r ends cleanly before a header, and
// io.ErrUnexpectedEOF for a truncated frame.
func readFrame(r io.Reader, hdr *[headerLen]byte, maxLen int, buf []byte) (header, []byte, error) {
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return header{}, nil, err
	}
	h, err := parseHeader(hdr, maxLen)
	if err != nil {
		return header{}, nil, err
	}
	p, err := readPayload(r, h, buf)
	return h, p, err
}

// readPayload reads h's payload; h.length has been checked by parseHeader.
func readPayload(r io.Reader, h header, buf []byte) ([]byte, error) {
	n := int(h.length)
	if cap(buf) >= n {
		buf = buf[:n]
	} else {
		buf = make([]byte, n)
	}
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// frameConn is one TCP connection speaking frames. Reads are done by one
// goroutine at a time (the owner's reader); writes are serialised by wmu so
// that each frame leaves in one writev.
type frameConn struct {
	c         *net.TCPConn
	br        *bufio.Reader
	ioTimeout time.Duration
	// maxLen is the receive limit: handshakeMaxFrame until authenticated,
	// then Config.MaxFrame. Only the reader touches it.
	maxLen int
	rhdr   [headerLen]byte

	wmu sync.Mutex // serialises frame writes; protects the fields below
	// whdr, wvec and wbufs are reused by every write so that a frame costs
	// no allocation.
	whdr  [headerLen]byte
	wvec  [4][]byte
	wbufs net.Buffers
}

// readBufSize coalesces small frames into one read syscall; payloads larger
// than the buffer are read straight into the caller's slice by bufio.
const readBufSize = 64 << 10

func newFrameConn(c *net.TCPConn, ioTimeout time.Duration) *frameConn {
	return &frameConn{
		c:         c,
		br:        bufio.NewReaderSize(c, readBufSize),
		ioTimeout: ioTimeout,
		maxLen:    handshakeMaxFrame,
	}
}

// readHeader reads and checks the next header; the caller set the deadline.
func (fc *frameConn) readHeader() (header, error) {
	if _, err := io.ReadFull(fc.br, fc.rhdr[:]); err != nil {
		return header{}, err
	}
	return parseHeader(&fc.rhdr, fc.maxLen)
}

// readPayload reads h's payload into buf when it fits; the caller set the
// deadline.
func (fc *frameConn) readPayload(h header, buf []byte) ([]byte, error) {
	return readPayload(fc.br, h, buf)
}

// readFrameTimed reads a whole frame with an IOTimeout deadline for each of
// header and payload. Used in the handshake and for small control frames.
func (fc *frameConn) readFrameTimed(buf []byte) (header, []byte, error) {
	_ = fc.c.SetReadDeadline(time.Now().Add(fc.ioTimeout))
	h, err := fc.readHeader()
	if err != nil {
		return header{}, nil, err
	}
	p, err := fc.readPayload(h, buf)
	return h, p, err
}

// writeFrame sends one frame whose payload is the concatenation of parts
// (at most three), in one writev, with an IOTimeout write deadline. It returns
// the bytes written, header included. A failed write leaves the connection
// mid-frame: the caller must close it.
func (fc *frameConn) writeFrame(typ frameType, id uint64, parts ...[]byte) (int, error) {
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	_ = fc.c.SetWriteDeadline(time.Now().Add(fc.ioTimeout))
	return fc.writeFrameLocked(typ, id, parts...)
}

// writeFrameLocked is writeFrame for a caller that holds wmu and has set the
// write deadline.
func (fc *frameConn) writeFrameLocked(typ frameType, id uint64, parts ...[]byte) (int, error) {
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	putHeader(&fc.whdr, header{typ: typ, length: uint32(total), id: id})
	fc.wvec[0] = fc.whdr[:]
	n := 1
	for _, p := range parts {
		if len(p) > 0 {
			fc.wvec[n] = p
			n++
		}
	}
	fc.wbufs = fc.wvec[:n]
	w, err := fc.wbufs.WriteTo(fc.c)
	// Drop references to the caller's buffers.
	fc.wvec = [4][]byte{}
	fc.wbufs = nil
	return int(w), err
}

// close closes the TCP connection; safe to call more than once.
func (fc *frameConn) close() error {
	return fc.c.Close()
}
