package schemes

import "github.com/scrfs/scrfs/layout"

// xor rebuilds the one lost member x as redset_recover_xor does: a
// pipelined reduction along the chain x+1 → x+2 → … → x-1 → x. For each row
// j and piece, every survivor q XORs its contribution (its data chunk of row
// j, or its parity when j == q) into what its left neighbour sent and passes
// it right; what reaches x is x's missing part of row j: its data chunk, or
// its parity when j == x. Rows go in order, so x writes its logical file
// sequentially.
func (b *rebuilder) xor(s *session) error {
	p, x, r := b.p.Size, b.lost[0], b.m.Rank
	piece := b.p.pieceSize()
	chunk := b.chunk
	n := pieces(chunk, piece)
	total := p * n
	at := func(i int) (row int, off int64, ln int) {
		row, o := i/n, i%n
		off = int64(o) * int64(piece)
		return row, off, int(min(int64(piece), chunk-off))
	}
	left, right := layout.Left(p, r), layout.Right(p, r)

	if r == x {
		// The lost member only receives, from its left neighbour, the end of
		// the chain. That neighbour sends each finished piece with its
		// CRC32C, so it is spliced into its file where it lies inside one.
		s.total = int64(p) * chunk
		var rbuf []byte // taken when a piece cannot be spliced (recvPiece)
		defer func() { s.pool.put(rbuf) }()
		for i := 0; i < total; i++ {
			row, off, ln := at(i)
			var err error
			if row == x {
				rbuf, err = s.recvToSegment(left, uint32(i), ln, b.w, 0, rbuf)
			} else {
				rbuf, err = s.recvToLogical(left, uint32(i), ln, b.lw, int64(xorChunk(x, row))*chunk+off, rbuf)
			}
			if err != nil {
				return err
			}
			s.addProgress(int64(ln))
		}
		return nil
	}

	// A survivor reads all of its data (every row but its own) and its
	// parity; its files' CRCs are checked at the end so a damaged survivor
	// file is named instead of silently poisoning x's data.
	crcs := newFileCRCs(b.hdr.Members[0].Files)
	lr := newLogicalReader(b.m.Dir, b.hdr.Members[0].Files, crcs)
	defer lr.close()
	sr := b.rf.Reader()
	s.total = int64(p) * chunk
	if r != mod(x+1, p) {
		// Every piece adds to a partial sum: the contribution is read as
		// it is XORed in (xorStep).
		for i := 0; i < total; i++ {
			row, at, ln := at(i)
			read := func(dst []byte, off int) error {
				return lr.readAt(dst, int64(xorChunk(r, row))*chunk+at+int64(off))
			}
			if row == r {
				read = func(dst []byte, off int) error { return sr.ReadAt(0, at+int64(off), dst) }
			}
			if err := s.xorStep(left, right, uint32(i), ln, right == x, read); err != nil {
				return err
			}
			s.addProgress(int64(ln))
		}
		return b.survivorSums(crcs)
	}
	// The chain starts right of x: x+1 has no one to receive from, and
	// sends what it reads as it is, read ahead.
	pf := startPrefetch(s.ctx, total, sendQueue+4, s.pool, func(i int, buf []byte) (span, error) {
		row, off, ln := at(i)
		var pc span
		var err error
		if row == r {
			pc, err = span{buf: buf[:frameLen+ln]}, sr.ReadAt(0, off, buf[frameLen:frameLen+ln])
		} else {
			pc, err = lr.piece(int64(xorChunk(r, row))*chunk+off, ln, buf)
		}
		if err != nil {
			return span{}, err
		}
		s.addProgress(int64(ln))
		return pc, nil
	})
	defer pf.close()
	for i := 0; i < total; i++ {
		pc, err := pf.next(s.ctx)
		if err != nil {
			return err
		}
		if err := s.xorFirst(right, uint32(i), pc, right == x, pf); err != nil {
			return err
		}
	}
	return b.survivorSums(crcs)
}
