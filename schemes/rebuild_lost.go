package schemes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/redfile"
)

// The lost member's side of a rebuild: it learns its records from the
// survivors, stages what they send, verifies all of it, and only then puts
// it in place.

// prepareLost collects this lost member's records from the survivors (all
// copies must agree) and opens its staging writers.
func (b *rebuilder) prepareLost(hellos map[int]*hello) error {
	x := b.m.Rank
	b.metas = make(map[int]*redfile.MemberMeta)
	from := make(map[int]int)
	firstJSON := make(map[int][]byte)
	for r := 0; r < b.p.Size; r++ {
		h, ok := hellos[r]
		if !ok {
			continue
		}
		for i := range h.Metas {
			mm := &h.Metas[i]
			if !slices.Contains(b.need(x), mm.Rank) {
				return &PeerError{Rank: r, Err: fmt.Errorf("%w: sent a record of rank %d", ErrProtocol, mm.Rank)}
			}
			if err := checkMeta(mm, mm.Rank); err != nil {
				return &PeerError{Rank: r, Err: err}
			}
			js, _ := json.Marshal(mm)
			if prev, ok := firstJSON[mm.Rank]; ok {
				if !bytes.Equal(prev, js) {
					return fmt.Errorf("%w: ranks %d and %d hold different records of rank %d", ErrMismatch, from[mm.Rank], r, mm.Rank)
				}
				continue
			}
			firstJSON[mm.Rank], from[mm.Rank], b.metas[mm.Rank] = js, r, mm
		}
	}
	for _, y := range b.need(x) {
		if _, ok := b.metas[y]; !ok {
			return fmt.Errorf("%w: no survivor holds the record of rank %d", ErrMismatch, y)
		}
	}
	if parts := int64(b.p.Size - b.p.Tolerance()); b.p.Kind != Partner && (b.metas[x].Logical+parts-1)/parts > b.chunk {
		return fmt.Errorf("%w: rank %d's %d bytes do not fit %d chunks of %d", ErrMismatch, x, b.metas[x].Logical, parts, b.chunk)
	}
	var segs []redfile.Segment
	switch b.p.Kind {
	case XOR:
		segs = []redfile.Segment{{Rank: x, Length: b.chunk}}
	case RS:
		for i := 0; i < b.p.Parity; i++ {
			segs = append(segs, redfile.Segment{Rank: x, Index: i, Length: b.chunk})
		}
	case Partner:
		for _, y := range b.p.recorded(x) {
			segs = append(segs, redfile.Segment{Rank: y, Length: b.metas[y].Logical})
		}
	}
	own := b.metas[x]
	lw, err := newLogicalWriter(b.stage, own.Files, newFileCRCs(own.Files))
	if err != nil {
		return err
	}
	b.lw = lw
	w, err := redfile.Create(b.path, b.m.Set.Nodes[x], b.bs, segs, b.o.spare)
	if err != nil {
		return err
	}
	b.w = w
	return nil
}

// verifyLost checks every restored file against its recorded CRC, and for
// PARTNER every received copy against its source's CRCs, then flushes the
// staged files.
func (b *rebuilder) verifyLost() error {
	own := b.metas[b.m.Rank]
	if err := verifySums(b.lw.crcs, own.Files, "restored "); err != nil {
		return err
	}
	for y, crcs := range b.copyCRCs {
		if err := verifySums(crcs, b.metas[y].Files, fmt.Sprintf("copy of rank %d: ", y)); err != nil {
			return err
		}
	}
	return b.lw.sync()
}

// verifySums compares tracked CRCs with the recorded ones of files.
func verifySums(crcs *fileCRCs, list []files.Meta, what string) error {
	sums, err := crcs.sums()
	if err != nil {
		return fmt.Errorf("internal error: restored data incomplete: %w", err)
	}
	i := 0
	for _, f := range list {
		if f.Type != files.Regular {
			continue
		}
		if f.HasCRC && sums[i] != f.CRC32C {
			return fmt.Errorf("%w: %s%s has crc32c %08x, recorded %08x (a survivor's data or parity is damaged)", ErrCorrupt, what, f.Path, sums[i], f.CRC32C)
		}
		i++
	}
	return nil
}

// commitLost puts the verified dataset in place and writes the fresh
// redundancy file.
func (b *rebuilder) commitLost() error {
	own := b.metas[b.m.Rank]
	if err := b.lw.close(); err != nil {
		return err
	}
	if err := place(b.m.Dir, b.stage, own.Files, b.o.log); err != nil {
		return err
	}
	members := []redfile.MemberMeta{*own}
	for _, y := range b.p.recorded(b.m.Rank) {
		members = append(members, *b.metas[y])
	}
	return b.w.Finish(newHeader(b.p, b.m, b.chunk, members))
}
