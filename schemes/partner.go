package schemes

import (
	"sync/atomic"
)

// PARTNER follows redset_partner.c: member r sends full copies of its
// logical file to its holders r+1..r+R and stores the copies of its sources
// r-1..r-R, nearest left partner first, one segment each.

// partnerEncode streams this member's logical file to its holders (one disk
// read feeds all R links) while one goroutine per source receives that
// source's file into its segment. Receivers never wait on the sender, so
// the exchange cannot deadlock.
func partnerEncode(s *session, p Params, r int, sizes map[int]int64, lr *logicalFile, w *redWriter) error {
	piece := p.pieceSize()
	holders := p.recorders(r)
	sources := p.recorded(r)
	own := sizes[r]
	n := pieces(own, piece)

	pf := startPrefetch(s.ctx, n, sendQueue+4, s.pool, func(o int, buf []byte) ([]byte, error) {
		ln := int(min(int64(piece), own-int64(o)*int64(piece)))
		if err := lr.readAt(buf[frameLen:frameLen+ln], int64(o)*int64(piece)); err != nil {
			return nil, err
		}
		s.addProgress(int64(ln))
		return buf[:frameLen+ln], nil
	})
	defer pf.close()

	fns := []func() error{func() error {
		for o := 0; o < n; o++ {
			buf, err := pf.next(s.ctx)
			if err != nil {
				return err
			}
			frame(buf, msgData, uint32(o))
			refs := new(atomic.Int32)
			refs.Store(int32(len(holders)))
			release := func() {
				if refs.Add(-1) == 0 {
					pf.release(buf)
				}
			}
			for _, h := range holders {
				if err := s.enqueue(h, buf, release); err != nil {
					return err
				}
			}
		}
		return nil
	}}
	for seg, src := range sources {
		fns = append(fns, func() error {
			return receiveStream(s, src, sizes[src], piece, func(b []byte) error {
				if err := w.write(seg, b); err != nil {
					return err
				}
				s.addProgress(int64(len(b)))
				return nil
			})
		})
	}
	return s.group(fns...)
}

// receiveStream receives a stream of length bytes from rank src in pieces
// and hands each piece's payload to sink.
func receiveStream(s *session, src int, length int64, piece int, sink func([]byte) error) error {
	rbuf := s.pool.get(0)
	defer func() { s.pool.put(rbuf) }()
	n := pieces(length, piece)
	for o := 0; o < n; o++ {
		ln := int(min(int64(piece), length-int64(o)*int64(piece)))
		msg, err := s.recv(src, msgData, uint32(o), rbuf, ln)
		if err != nil {
			return err
		}
		rbuf = msg
		if err := sink(msg[frameLen:]); err != nil {
			return err
		}
	}
	return nil
}
