package schemes

import (
	"crypto/subtle"
	"fmt"

	"github.com/klauspost/reedsolomon"
	"github.com/scrfs/scrfs/layout"
)

// RS follows redset_reedsolomon.c. Logical files are cut into p-k chunks and
// there are p rows. In row j, checksum i (0 <= i < k) is stored by member
// (j-i) mod p, and those k holders contribute zeros to the row; every other
// member contributes its next data chunk. Member r therefore holds checksum
// i of row r+i, and its data chunks sit in rows r+k .. r+p-1 (mod p) in
// ascending row order. The coefficient of member q's data in checksum i is
// entry (p+i, q) of redset's systematic Vandermonde matrix, which is what
// reedsolomon.New(p, k) builds; data shard index = member rank.

// rsChecksum returns which checksum member q holds in row j, or -1 if q
// contributes data to row j.
func rsChecksum(q, j, p, k int) int {
	if i := mod(j-q, p); i < k {
		return i
	}
	return -1
}

// rsDataIndex returns the index of member q's data chunk in row j (q must
// contribute data to row j): its rank among q's data rows in ascending order,
// which is redset's get_data_id.
func rsDataIndex(q, j, p, k int) int {
	id := j
	if j > q {
		id -= k
	}
	if lead := q + k - p; lead > 0 {
		id -= lead
	}
	return id
}

func newRS(p Params) (reedsolomon.Encoder, error) {
	enc, err := reedsolomon.New(p.Size, p.Parity)
	if err != nil {
		return nil, fmt.Errorf("reed-solomon %d+%d: %w", p.Size, p.Parity, err)
	}
	return enc, nil
}

// rsEncode computes this member's k checksum chunks. A producer goroutine
// walks this member's data rows in redset's step order (r+p-1 down to r+k),
// computes the piece's contribution to all k checksums of the row at once
// with EncodeIdx, and sends contribution i to its holder. The consumer (this
// goroutine) receives, at the same step, the k contributions to its own
// checksums, XORs them in, and writes each finished piece. Each link carries
// at most one message per step and both sides walk steps in the same order,
// so fixed-order receives cannot deadlock.
func rsEncode(s *session, p Params, r int, chunk int64, lr *logicalFile, w *redWriter) error {
	size, k := p.Size, p.Parity
	enc, err := newRS(p)
	if err != nil {
		return err
	}
	piece := p.pieceSize()
	n := pieces(chunk, piece)
	steps := size - k
	pieceLen := func(o int) int { return int(min(int64(piece), chunk-int64(o)*int64(piece))) }

	pf := startPrefetch(s.ctx, n*steps, 4, s.pool, func(i int, buf []byte) (span, error) {
		o, st := i/steps, size-1-i%steps
		ln := pieceLen(o)
		row := mod(r+st, size)
		off := int64(rsDataIndex(r, row, size, k))*chunk + int64(o)*int64(piece)
		pc, err := lr.piece(off, ln, buf)
		if err != nil {
			return span{}, err
		}
		s.addProgress(int64(ln))
		return pc, nil
	})
	defer pf.close()

	produce := func() error {
		parity := make([][]byte, k)
		limit := newInflight(s, 4*k)
		for i := 0; i < n*steps; i++ {
			o, st := i/steps, size-1-i%steps
			row := mod(r+st, size)
			pc, err := pf.next(s.ctx)
			if err != nil {
				return err
			}
			data := pc.payload()
			bufs := make([][]byte, k)
			for c := range bufs {
				if err := limit.acquire(); err != nil {
					return err
				}
				bufs[c] = s.pool.get(frameLen + len(data))
				parity[c] = bufs[c][frameLen:]
				clear(parity[c])
			}
			err = enc.EncodeIdx(data, r, parity)
			pf.release(pc)
			if err != nil {
				return fmt.Errorf("reed-solomon encode: %w", err)
			}
			for c, b := range bufs {
				frame(b, msgData, uint32(o))
				if err := s.enqueue(layout.RSHolder(size, row, c), b, func() { s.pool.put(b); limit.release() }); err != nil {
					return err
				}
			}
		}
		return nil
	}

	consume := func() error {
		// acc[c] accumulates checksum c with frame room in front: the first
		// contribution of each piece is received straight into it, which
		// saves clearing it and one XOR pass.
		acc := make([][]byte, k)
		for c := range acc {
			acc[c] = s.pool.get(frameLen + piece)
		}
		rbuf := s.pool.get(0)
		defer func() {
			for _, a := range acc {
				s.pool.put(a)
			}
			s.pool.put(rbuf)
		}()
		for o := 0; o < n; o++ {
			ln := pieceLen(o)
			for st := size - 1; st >= k; st-- {
				for c := 0; c < k; c++ {
					src := mod(r-st+c, size)
					if st == size-1 {
						msg, err := s.recv(src, msgData, uint32(o), acc[c][:0], ln)
						if err != nil {
							return err
						}
						if &msg[0] != &acc[c][0] { // the transport did not reuse it
							copy(acc[c][:frameLen+ln], msg)
						}
						continue
					}
					msg, err := s.recv(src, msgData, uint32(o), rbuf, ln)
					if err != nil {
						return err
					}
					rbuf = msg
					sum := acc[c][frameLen : frameLen+ln]
					subtle.XORBytes(sum, sum, msg[frameLen:])
				}
			}
			for c := range acc {
				if err := w.write(c, acc[c][frameLen:frameLen+ln]); err != nil {
					return err
				}
				s.addProgress(int64(ln))
			}
		}
		return nil
	}
	return s.group(produce, consume)
}
