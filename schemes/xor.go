package schemes

import (
	"crypto/subtle"

	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/redfile"
)

// XOR follows redset_xor.c. A member's logical file is cut into p-1 chunks
// and a zero chunk is inserted at its own row, giving p rows; member r stores
// the XOR of row r across the set. In row j, member q (q != j) contributes
// its data chunk xorChunk(q, j).

// xorChunk returns the index of member q's data chunk that sits in row j
// (j != q): rows below q hold chunks 0..q-1, rows above hold q..p-2.
func xorChunk(q, j int) int {
	if j < q {
		return j
	}
	return j - 1
}

// xorEncode is redset's pipelined reduce-scatter: for each piece offset, the
// partial XOR of row r-1-t travels one hop right per step t, each member
// XORing in its own contribution, until after p-1 hops it reaches the row's
// owner, whose own contribution is zero. A member only ever receives from its
// left and sends to its right, in pieces, so memory stays O(pieces).
func xorEncode(s *session, p Params, r int, chunk int64, lr *logicalFile, w *redfile.Writer) error {
	size := p.Size
	piece := p.pieceSize()
	left, right := layout.Left(size, r), layout.Right(size, r)
	n := pieces(chunk, piece)
	steps := size - 1
	pieceLen := func(o int) int { return int(min(int64(piece), chunk-int64(o)*int64(piece))) }
	// at returns where this member's contribution to step t of piece o
	// lies in its logical file: its chunk in row r-1-t.
	at := func(o, t int) int64 {
		return int64(xorChunk(r, mod(r-1-t, size)))*chunk + int64(o)*int64(piece)
	}

	// The first step of each piece sends this member's contribution as it
	// is: those are read ahead, on a reader of their own, firstAhead
	// pieces. Every later step reads its contribution as it XORs it in
	// (xorStep), on another reader of the same files, made before the
	// read-ahead starts using lr.
	inline := lr.sibling()
	defer inline.close()
	pf := startPrefetch(s.ctx, n, firstAhead, s.pool, func(o int, buf []byte) (span, error) {
		ln := pieceLen(o)
		pc, err := lr.piece(at(o, 0), ln, buf)
		if err != nil {
			return span{}, err
		}
		s.addProgress(int64(ln))
		return pc, nil
	})
	defer pf.close()

	var rbuf []byte // taken when a piece cannot be spliced (recvPiece)
	defer func() { s.pool.put(rbuf) }()
	for o := 0; o < n; o++ {
		ln := pieceLen(o)
		tag := uint32(o)
		pc, err := pf.next(s.ctx)
		if err != nil {
			return err
		}
		if err := s.xorFirst(right, tag, pc, steps == 1, pf); err != nil {
			return err
		}
		for t := 1; t < steps; t++ {
			base := at(o, t)
			err := s.xorStep(left, right, tag, ln, t == steps-1, func(dst []byte, off int) error {
				return inline.readAt(dst, base+int64(off))
			})
			if err != nil {
				return err
			}
			s.addProgress(int64(ln))
		}
		// Row r: this member's contribution is the zero chunk, so what
		// arrives is the finished parity.
		if rbuf, err = s.recvToSegment(left, tag, ln, w, 0, rbuf); err != nil {
			return err
		}
		s.addProgress(int64(ln))
	}
	return nil
}

// firstAhead is how many first-step contributions an XOR encode reads
// ahead: each is a whole piece's worth of steps ahead (p-1 of them), so
// three cover about what eight reads of every step's contribution did,
// and at most three pieces wait in memory for them.
const firstAhead = 3

// xorFirst sends pc, this member's contribution to a row it starts, to
// right as it is; finished tells that right stores it (a set of two), so
// it goes as sendPiece sends.
func (s *session) xorFirst(right int, tag uint32, pc span, finished bool, pf *prefetcher) error {
	release := func() { pf.release(pc) }
	if finished {
		return s.sendPiece([]int{right}, tag, pc, release)
	}
	frame(pc.buf, msgData, tag)
	return s.enqueue(right, pc.buf, release)
}

// xorStep does a later step of an XOR pipeline: it receives the partial
// sum from left, XORs this member's contribution into it and sends the sum
// right. The contribution is read by read(dst, off) (its bytes at offset
// off of the piece) xorBlock bytes at a time, into a buffer that stays in
// the core's cache, just before they are XORed in. Against reading every
// step's contribution ahead into a piece of its own and XORing the sum
// into it, that took the daemons' CPU 3-8% lower at 256 MiB per node
// (redbench -ab both ways round, bench/README.md) and holds fewer pieces.
// Where the link can (recvParts), each block of the sum is XORed as soon
// as it has landed, so it too is still in cache: that halved the XOR's
// share of the daemons' CPU in a profile, about 1% of it in all
// (bench/README.md). finished tells that right stores the sum as it is
// (sendPiece), so on the zero-copy path its CRC32C is taken in the same
// pass and right splices it.
func (s *session) xorStep(left, right int, tag uint32, ln int, finished bool, read func(dst []byte, off int) error) error {
	withCRC := finished && s.zeroCopy
	var crc uint32
	c := s.hotBlock()
	done := 0 // bytes of the sum the contribution is XORed into
	add := func(d []byte) error {
		if err := read(c[:len(d)], done); err != nil {
			return err
		}
		xorInto(d, d, c[:len(d)], withCRC, &crc)
		done += len(d)
		return nil
	}
	msg, err := s.recvParts(left, msgData, tag, s.pool.get(0), ln, add)
	if err != nil {
		return err
	}
	release := func() { s.pool.put(msg) }
	sum := msg[frameLen:]
	for done < ln {
		if err := add(sum[done:min(done+xorBlock, ln)]); err != nil {
			release()
			return err
		}
	}
	if finished {
		return s.sendPiece([]int{right}, tag, span{buf: msg, crc: crc, hasCRC: withCRC}, release)
	}
	frame(msg, msgData, tag)
	return s.enqueue(right, msg, release)
}

// recvParts is recv for a message of want payload bytes whose payload is
// worked on xorBlock bytes at a time: where the link can, each block goes
// to fn as soon as it has landed, while the kernel's copy of it is still
// in cache (on the project's VM the XOR ran at 21-25 GB/s with both
// operands in L2, 11-12 GB/s with the sum out of cache); fn is not called
// for blocks that arrived otherwise. buf is reused when it fits.
func (s *session) recvParts(from int, kind byte, tag uint32, buf []byte, want int, fn func(block []byte) error) ([]byte, error) {
	pl, err := s.peer(from)
	if err != nil {
		return nil, s.fail(err)
	}
	pr, ok := pl.conn.(PartsReceiver)
	if !ok {
		return s.recv(from, kind, tag, buf, want)
	}
	var local error // fn's: this member's own failure, not the link's
	msg, err := pr.RecvParts(s.ctx, buf, frameLen+want, frameLen, xorBlock, func(lo, hi int) error {
		if lo < frameLen {
			return nil
		}
		local = fn(buf[lo:hi])
		return local
	})
	if local != nil {
		return nil, local
	}
	return s.checkRecv(from, msg, err, kind, tag, want)
}

// xorBlock is how much of a contribution xorStep reads at a time before
// XORing it in: with the sum's block, well inside a core's L2 cache.
const xorBlock = 256 << 10

// xorInto sets dst to a XOR b; withCRC, it goes on *crc with the CRC32C of
// the result, taken sumBlock bytes at a time as they are made.
func xorInto(dst, a, b []byte, withCRC bool, crc *uint32) {
	if !withCRC {
		subtle.XORBytes(dst, a, b)
		return
	}
	for at := 0; at < len(dst); at += sumBlock {
		e := min(at+sumBlock, len(dst))
		subtle.XORBytes(dst[at:e], a[at:e], b[at:e])
		*crc = crc32c.Update(*crc, dst[at:e])
	}
}

// hotBlock returns the session's block buffer for XOR steps, taken from
// its pool on first use (close gives it back); its payload starts where
// the pool aligns it.
func (s *session) hotBlock() []byte {
	if s.hot == nil {
		s.hot = s.blocks.get(frameLen + xorBlock)
	}
	return s.hot[frameLen:]
}
