package schemes

import (
	"sync/atomic"

	"github.com/scrfs/scrfs/redfile"
)

// PARTNER follows redset_partner.c: member r sends full copies of its
// logical file to its holders r+1..r+R and stores the copies of its sources
// r-1..r-R, nearest left partner first, one segment each.

// partnerEncode streams this member's logical file to its holders (one disk
// read feeds all R links) while one goroutine per source receives that
// source's file into its segment. Receivers never wait on the sender, so
// the exchange cannot deadlock.
func partnerEncode(s *session, p Params, r int, sizes map[int]int64, lr *logicalFile, w *redfile.Writer) error {
	piece := p.pieceSize()
	holders := p.recorders(r)
	sources := p.recorded(r)
	own := sizes[r]
	n := pieces(own, piece)

	pf := startPrefetch(s.ctx, n, sendQueue+4, s.pool, func(o int, buf []byte) (span, error) {
		ln := int(min(int64(piece), own-int64(o)*int64(piece)))
		pc, err := lr.piece(int64(o)*int64(piece), ln, buf)
		if err != nil {
			return span{}, err
		}
		s.addProgress(int64(ln))
		return pc, nil
	})
	defer pf.close()

	fns := []func() error{func() error {
		for o := 0; o < n; o++ {
			pc, err := pf.next(s.ctx)
			if err != nil {
				return err
			}
			refs := new(atomic.Int32)
			refs.Store(int32(len(holders)))
			release := func() {
				if refs.Add(-1) == 0 {
					pf.release(pc)
				}
			}
			if err := s.sendPiece(holders, uint32(o), pc, release); err != nil {
				return err
			}
		}
		return nil
	}}
	for seg, src := range sources {
		fns = append(fns, func() error {
			return receiveCopy(s, src, sizes[src], piece, w, seg)
		})
	}
	return s.group(fns...)
}

// receiveCopy receives rank src's logical file of length bytes into
// segment seg of w, each piece spliced when it can be (recvToSegment).
func receiveCopy(s *session, src int, length int64, piece int, w *redfile.Writer, seg int) error {
	var rbuf []byte // taken when a piece cannot be spliced (recvPiece)
	defer func() { s.pool.put(rbuf) }()
	for o := 0; o < pieces(length, piece); o++ {
		ln := int(min(int64(piece), length-int64(o)*int64(piece)))
		var err error
		if rbuf, err = s.recvToSegment(src, uint32(o), ln, w, seg, rbuf); err != nil {
			return err
		}
		s.addProgress(int64(ln))
	}
	return nil
}
