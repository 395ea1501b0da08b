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

	// The reader produces this member's contributions in the order the
	// pipeline consumes them: for each piece, rows r-1, r-2, ..., r+1.
	pf := startPrefetch(s.ctx, n*steps, sendQueue+4, s.pool, func(i int, buf []byte) (span, error) {
		o, t := i/steps, i%steps
		ln := pieceLen(o)
		row := mod(r-1-t, size)
		off := int64(xorChunk(r, row))*chunk + int64(o)*int64(piece)
		pc, err := lr.piece(off, ln, buf)
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
		for t := 0; t < steps; t++ {
			pc, err := pf.next(s.ctx)
			if err != nil {
				return err
			}
			if err := s.xorStep(left, right, tag, ln, t == 0, t == steps-1, pc, pf); err != nil {
				return err
			}
		}
		// Row r: this member's contribution is the zero chunk, so what
		// arrives is the finished parity.
		var err error
		if rbuf, err = s.recvToSegment(left, tag, ln, w, 0, rbuf); err != nil {
			return err
		}
		s.addProgress(int64(ln))
	}
	return nil
}

// xorStep does one step of an XOR pipeline with this member's contribution
// pc: the first step sends it as it is; later ones XOR into it the partial
// sum received from left. The sum goes right; finished tells that right
// stores it as it is (sendPiece), so on the zero-copy path it can splice it.
func (s *session) xorStep(left, right int, tag uint32, ln int, first, finished bool, pc span, pf *prefetcher) error {
	release := func() { pf.release(pc) }
	if !first {
		msg, err := s.recv(left, msgData, tag, s.pool.get(0), ln)
		if err != nil {
			release()
			return err
		}
		if finished && s.zeroCopy {
			pc.crc, pc.hasCRC = xorWithCRC(pc.payload(), msg[frameLen:]), true
		} else {
			subtle.XORBytes(pc.payload(), pc.payload(), msg[frameLen:])
			pc.hasCRC = false // it was the contribution's
		}
		s.pool.put(msg)
	}
	if finished {
		return s.sendPiece([]int{right}, tag, pc, release)
	}
	frame(pc.buf, msgData, tag)
	return s.enqueue(right, pc.buf, release)
}

// xorWithCRC XORs src into dst and returns the CRC32C of the result, taken
// while its bytes are still in cache.
func xorWithCRC(dst, src []byte) uint32 {
	var crc uint32
	for at := 0; at < len(dst); at += sumBlock {
		d := dst[at:min(at+sumBlock, len(dst))]
		subtle.XORBytes(d, d, src[at:])
		crc = crc32c.Update(crc, d)
	}
	return crc
}
