package netbound

import (
	"crypto/subtle"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/scrfs/scrfs/internal/crc32c"
)

// XORRing is XOR's own work, done by plain goroutines: redbench's (d).
// Where (c) moves XOR's bytes (read B, send B, receive B, write B/p−1) as
// independent streams, the ring couples them as redset's pipelined
// reduce-scatter must (docs/formats-redundancy.md) and adds the passes in
// cache integrity and the code need: the CRC32C of every byte read and of
// the finished parity, and the XOR of every partial sum received into the
// contribution read for it. It reads a checkpoint written just before each
// run, as a daemon's encode reads one the application just wrote (the
// kernel's first read of freshly written pages costs more than a read of
// pages read before, which (c) reads). No framing, no protocol, no daemon:
// what is left between it and scrfs's daemons is theirs.
type XORRing struct {
	Chunk int64 // ⌈B/(p−1)⌉: a member's logical file is p−1 chunks
	Piece int   // bytes per message (the daemons' redundancy.piece_size)
}

// ringBlock is how much of a partial sum is received before the
// contribution's bytes for it are read and XORed in, so both stay in a
// core's cache (the daemons' xorBlock).
const ringBlock = 256 << 10

// ringMember is one node's part of an XORRing.
type ringMember struct {
	ring        XORRing
	index, p    int
	left, right *net.TCPConn
	src         source
	dst         *os.File
	free        chan []byte // pieces, reused
	hot         []byte      // a contribution's block
	crc         uint32      // of everything read and stored; kept so the passes are not optimised away
}

// newRingMember opens the redundancy file and touches the buffers
// (untimed); the member reads its checkpoint from src, which it closes.
func newRingMember(ring XORRing, index, p int, left, right *net.TCPConn, src source, dst string) (*ringMember, error) {
	if ring.Chunk < 1 || ring.Piece < ringBlock || ring.Piece%ringBlock != 0 {
		src.close()
		return nil, fmt.Errorf("xor ring: chunk %d, piece %d (a multiple of %d)", ring.Chunk, ring.Piece, ringBlock)
	}
	m := &ringMember{ring: ring, index: index, p: p, left: left, right: right, src: src, free: make(chan []byte, 64)}
	m.hot = touched(ringBlock)
	var err error
	if m.dst, err = os.Create(dst); err != nil {
		src.close()
		return nil, err
	}
	for range 8 {
		m.free <- touched(ring.Piece)
	}
	return m, nil
}

func (m *ringMember) close() {
	m.src.close()
	m.dst.Close()
}

// piece returns a free piece buffer, a new one when all are in flight.
func (m *ringMember) piece() []byte {
	select {
	case b := <-m.free:
		return b
	default:
		return make([]byte, m.ring.Piece)
	}
}

// run encodes: for each piece offset, step 0 sends this member's
// contribution to the row it starts, each later step receives the partial
// sum from the left, XORs in the contribution and passes it right, and the
// last receives the finished parity of this member's own row (its CRC32C
// taken by the member that finished it, block by block as it XORed) and
// stores it.
// A sender goroutine drains the sends, so no member waits for its right
// neighbour to receive before it receives itself.
func (m *ringMember) run() error {
	sends := make(chan []byte, 1024)
	sent := make(chan error, 1)
	go func() {
		var err error
		for b := range sends {
			if err == nil {
				_, err = m.right.Write(b)
			}
			m.release(b)
		}
		sent <- err
	}()
	err := m.pieces(sends)
	close(sends)
	if serr := <-sent; err == nil {
		err = serr
	}
	if err == nil {
		err = m.dst.Sync()
	}
	return err
}

func (m *ringMember) release(b []byte) {
	select {
	case m.free <- b[:cap(b)]:
	default:
	}
}

func (m *ringMember) pieces(sends chan<- []byte) error {
	chunk, piece := m.ring.Chunk, int64(m.ring.Piece)
	for o := int64(0); o*piece < chunk; o++ {
		ln := int(min(piece, chunk-o*piece))
		at := func(t int) int64 {
			row := ((m.index-1-t)%m.p + m.p) % m.p
			c := row
			if row > m.index {
				c = row - 1
			}
			return int64(c)*chunk + o*piece
		}
		b := m.piece()[:ln]
		if err := m.read(b, at(0)); err != nil {
			return err
		}
		sends <- b
		for t := 1; t < m.p-1; t++ {
			sum := m.piece()[:ln]
			for off := 0; off < ln; off += ringBlock {
				blk := sum[off:min(off+ringBlock, ln)]
				if _, err := io.ReadFull(m.left, blk); err != nil {
					return fmt.Errorf("receive: %w", err)
				}
				c := m.hot[:len(blk)]
				if err := m.read(c, at(t)+int64(off)); err != nil {
					return err
				}
				subtle.XORBytes(blk, blk, c)
				if t == m.p-2 {
					m.crc = crc32c.Update(m.crc, blk) // the finished parity's, in cache
				}
			}
			sends <- sum
		}
		// Spliced from the socket into the file, in order, as the
		// daemons store a finished parity.
		n, err := m.dst.ReadFrom(io.LimitReader(m.left, int64(ln)))
		if err == nil && n < int64(ln) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return fmt.Errorf("store parity: %d of %d bytes: %w", n, ln, err)
		}
	}
	return nil
}

// read fills b from the checkpoint at off and takes its CRC32C.
func (m *ringMember) read(b []byte, off int64) error {
	crc, err := m.src.readAt(b, off)
	m.crc ^= crc
	return err
}
