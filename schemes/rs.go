package schemes

import (
	"fmt"

	"github.com/klauspost/reedsolomon"
	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/redfile"
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

// rsTerms computes member r's terms of the k checksums of a row and adds
// them into partial sums (EncodeIdx). A chain's first contributor instead
// overwrites the sums with them, through a code of its own: one data shard,
// with this member's column of the set's parity matrix as its checksum
// rows. So no buffer is zeroed, and that step's one pass over the data
// writes all k sums (EncodeIdx, for k < 3, reads the data once per
// checksum, and the sums as well).
type rsTerms struct {
	all, one reedsolomon.Encoder
	r        int
	shards   [][]byte // one's shards: data, then the sums
	part     [][]byte // apply's block of the sums
}

func newRSTerms(p Params, r int) (*rsTerms, error) {
	all, err := newRS(p)
	if err != nil {
		return nil, err
	}
	// The column is what EncodeIdx adds for a data byte of 1.
	col := make([][]byte, p.Parity)
	for i := range col {
		col[i] = make([]byte, 1)
	}
	if err := all.EncodeIdx([]byte{1}, r, col); err != nil {
		return nil, fmt.Errorf("reed-solomon column %d: %w", r, err)
	}
	one, err := reedsolomon.New(1, p.Parity, reedsolomon.WithCustomMatrix(col), reedsolomon.WithMaxGoroutines(1))
	if err != nil {
		return nil, fmt.Errorf("reed-solomon column %d: %w", r, err)
	}
	return &rsTerms{all: all, one: one, r: r, shards: make([][]byte, 1+p.Parity), part: make([][]byte, p.Parity)}, nil
}

// apply sets sums to this member's terms for data (first) or adds them
// in. With crcs it goes sumBlock bytes at a time and leaves each sum's
// CRC32C in crcs, taken while the bytes are still in cache.
func (t *rsTerms) apply(data []byte, sums [][]byte, first bool, crcs []uint32) error {
	if crcs == nil {
		return t.code(data, sums, first)
	}
	clear(crcs)
	part := t.part
	for at := 0; at < len(data); at += sumBlock {
		end := min(at+sumBlock, len(data))
		for i, b := range sums {
			part[i] = b[at:end]
		}
		if err := t.code(data[at:end], part, first); err != nil {
			return err
		}
		for i, b := range part {
			crcs[i] = crc32c.Update(crcs[i], b)
		}
	}
	return nil
}

func (t *rsTerms) code(data []byte, sums [][]byte, first bool) error {
	if !first {
		return t.all.EncodeIdx(data, t.r, sums)
	}
	t.shards[0] = data
	copy(t.shards[1:], sums)
	err := t.one.Encode(t.shards)
	clear(t.shards)
	return err
}

// rsEncode computes this member's k checksum chunks. Each row's checksums
// are summed along a chain, as XOR's parity is: row j's data comes from
// members j+1 … j+p−k (the k members before them hold its checksums), so
// the first of them computes its contribution to all k checksums with
// EncodeIdx, and each next one receives those k partial sums from its left
// neighbour and adds its own into them (EncodeIdx accumulates), until the
// last sends checksum i, finished, to its holder j−i, which is one of its k
// right neighbours. At step t of a piece this member is the (t+1)-th
// contributor of row r−1−t; after its p−k steps it receives its own k
// finished checksums, of rows r … r+k−1, from the members 1 … k to its
// left, and stores them. The chain moves as many bytes as sending every
// contribution straight to its holders (redset's way, which the files
// match byte for byte), but the sums are built inside the coder: no
// separate XOR pass at the holders, and no buffer zeroed (rsTerms.apply).
//
// Every link carries its messages in the order both ends walk (piece,
// step, checksum); a member finishes a piece, its finished checksums
// received, before it sends anything of the next, and like XOR's ring it
// only ever waits on members to its left, so fixed-order receives cannot
// deadlock.
func rsEncode(s *session, p Params, r int, chunk int64, lr *logicalFile, w *redfile.Writer) error {
	size, k := p.Size, p.Parity
	terms, err := newRSTerms(p, r)
	if err != nil {
		return err
	}
	piece := p.pieceSize()
	n := pieces(chunk, piece)
	steps := size - k
	left := layout.Left(size, r)
	pieceLen := func(o int) int { return int(min(int64(piece), chunk-int64(o)*int64(piece))) }
	tag := func(o, i int) uint32 { return uint32(o*k + i) }

	// The reader produces this member's data in the order the chain uses
	// it: for each piece, rows r−1, r−2, …, r−(p−k).
	pf := startPrefetch(s.ctx, n*steps, 4, s.pool, func(i int, buf []byte) (span, error) {
		o, t := i/steps, i%steps
		ln := pieceLen(o)
		row := mod(r-1-t, size)
		off := int64(rsDataIndex(r, row, size, k))*chunk + int64(o)*int64(piece)
		pc, err := lr.piece(off, ln, buf)
		if err != nil {
			return span{}, err
		}
		s.addProgress(int64(ln))
		return pc, nil
	})
	defer pf.close()

	sums := make([][]byte, k) // the k partial sums in hand, frame room in front
	parity := make([][]byte, k)
	sumCRCs := make([]uint32, k)
	var rbuf []byte // taken when a piece cannot be spliced (recvPiece)
	defer func() { s.pool.put(rbuf) }()
	for o := 0; o < n; o++ {
		ln := pieceLen(o)
		for t := 0; t < steps; t++ {
			pc, err := pf.next(s.ctx)
			if err != nil {
				return err
			}
			for i := range sums {
				if t == 0 {
					sums[i] = s.pool.get(frameLen + ln)
					continue
				}
				msg, err := s.recv(left, msgData, tag(o, i), s.pool.get(0), ln)
				if err != nil {
					pf.release(pc)
					for _, b := range sums[:i] {
						s.pool.put(b)
					}
					return err
				}
				sums[i] = msg
			}
			for i, b := range sums {
				parity[i] = b[frameLen : frameLen+ln]
			}
			// Finished checksums are stored as they are, so on the
			// zero-copy path they go with their CRC32C (sendPiece).
			last := t == steps-1
			var crcs []uint32
			if last && s.zeroCopy {
				crcs = sumCRCs
			}
			err = terms.apply(pc.payload(), parity, t == 0, crcs)
			pf.release(pc)
			if err != nil {
				return fmt.Errorf("reed-solomon encode: %w", err)
			}
			for i, b := range sums {
				// Partial sums go right; the last contributor sends
				// checksum i of row r−p+k, finished, to its holder r+k−i,
				// which stores it as it is.
				done := func() { s.pool.put(b) }
				if last {
					fin := span{buf: b[:frameLen+ln], crc: sumCRCs[i], hasCRC: crcs != nil}
					err = s.sendPiece([]int{mod(r+k-i, size)}, tag(o, i), fin, done)
				} else {
					frame(b, msgData, tag(o, i))
					err = s.enqueue(layout.Right(size, r), b, done)
				}
				if err != nil {
					return err
				}
			}
		}
		// This member's checksum i (of row r+i) comes finished from that
		// row's last contributor, r+i+p−k: k−i members to the left.
		for i := 0; i < k; i++ {
			if rbuf, err = s.recvToSegment(mod(r-(k-i), size), tag(o, i), ln, w, i, rbuf); err != nil {
				return err
			}
			s.addProgress(int64(ln))
		}
	}
	return nil
}
