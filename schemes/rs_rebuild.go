package schemes

import (
	"fmt"

	"github.com/scrfs/scrfs/layout"
)

// shardRef names one shard of a row: member's data (parity < 0) or the
// checksum parity it holds.
type shardRef struct{ member, parity int }

// shardIndex returns the shard's index in reedsolomon's shard list: data
// shards are indexed by member rank, checksum i is p+i.
func (sr shardRef) shardIndex(p int) int {
	if sr.parity < 0 {
		return sr.member
	}
	return p + sr.parity
}

// rsRow is the rebuild plan of one row.
type rsRow struct {
	solver    int
	providers []shardRef // shards fetched: surviving contributors, then enough surviving checksums
	unknowns  []shardRef // the lost members' shards of this row, ascending member
}

// rsPlan decides, identically on every member, who solves each row and
// which shards it needs. A surviving member j solves row j, as in redset;
// the rows of lost members go round-robin to the survivors, so no node does
// all the work. A row has p known data shards once the holders' zeros are
// counted, minus one per lost contributor; each of those is made up with
// one surviving checksum, so a solver fetches exactly p-k shards.
func (b *rebuilder) rsPlan() []rsRow {
	p, k := b.p.Size, b.p.Parity
	var alive []int
	for r := 0; r < p; r++ {
		if b.alive(r) {
			alive = append(alive, r)
		}
	}
	rows := make([]rsRow, p)
	t := 0
	for j := range rows {
		row := &rows[j]
		if b.alive(j) {
			row.solver = j
		} else {
			row.solver = alive[t%len(alive)]
			t++
		}
		missing := 0
		for q := 0; q < p; q++ {
			c := rsChecksum(q, j, p, k)
			switch {
			case c >= 0 && b.isLost[q]:
				row.unknowns = append(row.unknowns, shardRef{q, c})
			case c >= 0:
			case b.alive(q):
				row.providers = append(row.providers, shardRef{q, -1})
			default:
				missing++
				row.unknowns = append(row.unknowns, shardRef{q, -1})
			}
		}
		for i := 0; i < k && missing > 0; i++ {
			if h := layout.RSHolder(p, j, i); b.alive(h) {
				row.providers = append(row.providers, shardRef{h, i})
				missing--
			}
		}
	}
	return rows
}

// rs rebuilds up to k lost members, piece by piece across all rows at once:
// providers send their shard of row j to its solver, the solver runs
// ReconstructSome for the row's unknowns and sends each to its lost owner,
// who stores it in its files or its checksum segment (spliced, on the
// zero-copy path). Survivors run a producer and a solver goroutine. Every
// link carries at most one message per (piece, row), and all sides walk
// (piece, row) in the same order, so fixed-order receives cannot deadlock.
func (b *rebuilder) rs(s *session) error {
	p, k, r := b.p.Size, b.p.Parity, b.m.Rank
	piece := b.p.pieceSize()
	chunk := b.chunk
	n := pieces(chunk, piece)
	plan := b.rsPlan()
	pieceAt := func(o int) (off int64, ln int) {
		off = int64(o) * int64(piece)
		return off, int(min(int64(piece), chunk-off))
	}
	tag := func(o, j int) uint32 { return uint32(o*p + j) }

	if b.amLost {
		// Solvers send what they rebuild with its CRC32C, so it is spliced
		// into its file where it lies inside one.
		s.total = int64(p) * chunk
		var rbuf []byte // taken when a piece cannot be spliced (recvPiece)
		defer func() { s.pool.put(rbuf) }()
		for o := 0; o < n; o++ {
			off, ln := pieceAt(o)
			for j := 0; j < p; j++ {
				var err error
				if c := rsChecksum(r, j, p, k); c >= 0 {
					rbuf, err = s.recvToSegment(plan[j].solver, tag(o, j), ln, b.w, c, rbuf)
				} else {
					rbuf, err = s.recvToLogical(plan[j].solver, tag(o, j), ln, b.lw, int64(rsDataIndex(r, j, p, k))*chunk+off, rbuf)
				}
				if err != nil {
					return err
				}
				s.addProgress(int64(ln))
			}
		}
		return nil
	}

	own := b.hdr.Members[0]
	// Producer and solver both read this member's data; between them every
	// data row is read once, so one shared tracker checks all its files.
	crcs := newFileCRCs(own.Files)
	// newShardReader returns a reader of this member's shard of row j (its
	// data chunk, or its checksum segment, CRC-checked) for one goroutine.
	newShardReader := func() (func(j int, off int64, dst []byte) error, func()) {
		lr := newLogicalReader(b.m.Dir, own.Files, crcs)
		sr := b.rf.Reader()
		return func(j int, off int64, dst []byte) error {
			if c := rsChecksum(r, j, p, k); c >= 0 {
				return sr.ReadAt(c, off, dst)
			}
			return lr.readAt(dst, int64(rsDataIndex(r, j, p, k))*chunk+off)
		}, func() { lr.close() }
	}
	for _, row := range plan {
		if provides(row, r) {
			s.total += chunk
		}
	}

	produce := func() error {
		read, done := newShardReader()
		defer done()
		limit := newInflight(s, 2*sendQueue)
		for o := 0; o < n; o++ {
			off, ln := pieceAt(o)
			for j := 0; j < p; j++ {
				row := plan[j]
				if row.solver == r || !provides(row, r) {
					continue
				}
				if err := limit.acquire(); err != nil {
					return err
				}
				buf := s.pool.get(frameLen + ln)
				if err := read(j, off, buf[frameLen:]); err != nil {
					return err
				}
				s.addProgress(int64(ln))
				frame(buf, msgData, tag(o, j))
				if err := s.enqueue(row.solver, buf, func() { s.pool.put(buf); limit.release() }); err != nil {
					return err
				}
			}
		}
		return nil
	}

	solve := func() error {
		enc, err := newRS(b.p)
		if err != nil {
			return err
		}
		read, done := newShardReader()
		defer done()
		zero := s.pool.get(piece)
		clear(zero)
		defer s.pool.put(zero)
		shards := make([][]byte, p+k)
		required := make([]bool, p+k)
		var held, outs [][]byte
		for o := 0; o < n; o++ {
			off, ln := pieceAt(o)
			for j := 0; j < p; j++ {
				row := plan[j]
				if row.solver != r {
					continue
				}
				clear(shards)
				clear(required)
				held, outs = held[:0], outs[:0]
				for q := 0; q < p; q++ {
					if rsChecksum(q, j, p, k) >= 0 {
						shards[q] = zero[:ln] // holders contribute zeros
					}
				}
				for _, pr := range row.providers {
					buf := s.pool.get(frameLen + ln)
					if pr.member == r {
						if err := read(j, off, buf[frameLen:]); err != nil {
							return err
						}
						s.addProgress(int64(ln))
					} else {
						msg, err := s.recv(pr.member, msgData, tag(o, j), buf[:0], ln)
						if err != nil {
							return err
						}
						buf = msg
					}
					held = append(held, buf)
					shards[pr.shardIndex(p)] = buf[frameLen:]
				}
				// Unknowns: lost contributors' data and lost holders'
				// checksums; ReconstructSome computes exactly these.
				for _, u := range row.unknowns {
					out := s.pool.get(frameLen + ln)
					outs = append(outs, out)
					idx := u.shardIndex(p)
					shards[idx] = out[frameLen:frameLen] // empty: reedsolomon fills it in place
					required[idx] = true
				}
				if err := enc.ReconstructSome(shards, required); err != nil {
					return fmt.Errorf("reed-solomon rebuild of row %d: %w", j, err)
				}
				for _, h := range held {
					s.pool.put(h)
				}
				for i, u := range row.unknowns {
					out := outs[i]
					pc := span{buf: out[:frameLen+ln]}
					if err := s.sendPiece([]int{u.member}, tag(o, j), pc, func() { s.pool.put(out) }); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := s.group(produce, solve); err != nil {
		return err
	}
	return b.survivorSums(crcs)
}

func provides(row rsRow, r int) bool {
	for _, pr := range row.providers {
		if pr.member == r {
			return true
		}
	}
	return false
}
