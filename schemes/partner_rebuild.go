package schemes

import (
	"fmt"
	"slices"

	"github.com/scrfs/scrfs/redfile"
)

// partnerHolder returns the nearest holder of x's copies that is not lost.
func partnerHolder(p Params, x int, lost []int) (int, bool) {
	for _, h := range p.recorders(x) {
		if !slices.Contains(lost, h) {
			return h, true
		}
	}
	return -1, false
}

// pstream is one logical file a partner rebuild moves: source's data, from
// provider to target, either as target's own files (seg < 0) or as the copy
// in segment seg of target's partner file.
type pstream struct {
	target, source, provider, seg int
}

// partnerStreams lists every stream of the rebuild in a fixed order, which
// is also each link's message order. A lost member's files come from its
// nearest surviving holder; the copies its partner file needs come from
// each source itself, or from that source's nearest surviving holder.
func (b *rebuilder) partnerStreams() []pstream {
	var out []pstream
	for _, x := range b.lost {
		h, _ := partnerHolder(b.p, x, b.lost)
		out = append(out, pstream{target: x, source: x, provider: h, seg: -1})
		for d, y := range b.p.recorded(x) {
			prov := y
			if b.isLost[y] {
				prov, _ = partnerHolder(b.p, y, b.lost)
			}
			out = append(out, pstream{target: x, source: y, provider: prov, seg: d})
		}
	}
	return out
}

// partner runs this member's streams: as a survivor, one goroutine per
// lost target sends what it provides; as a lost member, one goroutine per
// provider receives. Each link carries its streams in list order and its
// receiver never waits on anything else, so nothing can deadlock.
func (b *rebuilder) partner(s *session) error {
	streams := b.partnerStreams()
	piece := b.p.pieceSize()
	var fns []func() error
	if b.amLost {
		byProvider := make(map[int][]pstream)
		var provs []int
		// The copies a lost member receives for its own partner file come
		// from survivors' application files or partner files; checking them
		// against their sources' recorded CRCs keeps a damaged survivor file
		// from becoming a valid-looking copy.
		b.copyCRCs = make(map[int]*fileCRCs)
		trackers := make(map[int]*logicalFile)
		for _, y := range b.p.recorded(b.m.Rank) {
			list := b.metas[y].Files
			b.copyCRCs[y] = newFileCRCs(list)
			trackers[y] = newLogical(list)
			trackers[y].crcs = b.copyCRCs[y]
		}
		for _, st := range streams {
			if st.target != b.m.Rank {
				continue
			}
			if _, ok := byProvider[st.provider]; !ok {
				provs = append(provs, st.provider)
			}
			byProvider[st.provider] = append(byProvider[st.provider], st)
			s.total += b.metas[st.source].Logical
		}
		for _, prov := range provs {
			fns = append(fns, func() error {
				var rbuf []byte // taken when a piece cannot be spliced (recvPiece)
				defer func() { s.pool.put(rbuf) }()
				for _, st := range byProvider[prov] {
					length := b.metas[st.source].Logical
					for o := 0; o < pieces(length, piece); o++ {
						off := int64(o) * int64(piece)
						ln := int(min(int64(piece), length-off))
						var err error
						if st.seg < 0 {
							rbuf, err = s.recvToLogical(prov, uint32(o), ln, b.lw, off, rbuf)
						} else {
							rbuf, err = s.recvToCopy(prov, uint32(o), ln, b.w, st.seg, trackers[st.source], off, rbuf)
						}
						if err != nil {
							return err
						}
						s.addProgress(int64(ln))
					}
				}
				return nil
			})
		}
		return s.group(fns...)
	}

	byTarget := make(map[int][]pstream)
	var targets []int
	for _, st := range streams {
		if st.provider != b.m.Rank {
			continue
		}
		if _, ok := byTarget[st.target]; !ok {
			targets = append(targets, st.target)
		}
		byTarget[st.target] = append(byTarget[st.target], st)
		s.total += b.streamLen(st)
	}
	for _, x := range targets {
		fns = append(fns, func() error {
			for _, st := range byTarget[x] {
				if err := b.sendStream(s, st, piece); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return s.group(fns...)
}

// sendStream reads source's logical file (this member's own files, or its
// copy in this member's partner file, CRC-checked) and sends it in pieces.
func (b *rebuilder) sendStream(s *session, st pstream, piece int) error {
	var read func(p []byte, off int64) error
	var length int64
	if st.source == b.m.Rank {
		own := b.hdr.Members[0]
		lr := newLogicalReader(b.m.Dir, own.Files, nil)
		defer lr.close()
		read, length = lr.readAt, own.Logical
	} else {
		seg := slices.IndexFunc(b.hdr.Segments, func(sg redfile.Segment) bool { return sg.Rank == st.source })
		if seg < 0 {
			return fmt.Errorf("internal error: rank %d holds no copy of rank %d", b.m.Rank, st.source)
		}
		sr := b.rf.Reader()
		read = func(p []byte, off int64) error { return sr.ReadAt(seg, off, p) }
		length = b.hdr.Segments[seg].Length
	}
	for o := 0; o < pieces(length, piece); o++ {
		off := int64(o) * int64(piece)
		ln := int(min(int64(piece), length-off))
		buf := s.pool.get(frameLen + ln)
		if err := read(buf[frameLen:], off); err != nil {
			return err
		}
		s.addProgress(int64(ln))
		// On the zero-copy path the piece carries its CRC32C, so the lost
		// member can splice it into its file unseen (recvToLogical,
		// recvToCopy); sendPiece frames it either way.
		pc := span{buf: buf[:frameLen+ln]}
		if err := s.sendPiece([]int{st.target}, uint32(o), pc, func() { s.pool.put(buf) }); err != nil {
			return err
		}
	}
	return nil
}

// streamLen returns the length of a stream this survivor provides.
func (b *rebuilder) streamLen(st pstream) int64 {
	if st.source == b.m.Rank {
		return b.hdr.Members[0].Logical
	}
	if mm, ok := b.hdr.Member(st.source); ok {
		return mm.Logical
	}
	return 0
}
