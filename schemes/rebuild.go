package schemes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/redfile"
)

// Rebuild restores the lost members' files (bytes and metadata: names,
// sizes, modes, uid/gid, times, directories, symlinks, hard links) and their
// redundancy files. All members of the set call it concurrently with the same
// Params and lost list; a lost member's Dir may be absent, empty or partial
// and it learns everything from the others. Survivors only read.
//
// More lost members than the scheme tolerates gives ErrTooManyLost, naming
// the ranks, before any byte is written or sent. Every byte read from a
// redundancy file is checked against its CRC first, and every restored file
// against the CRC32C recorded when it was encoded; a mismatch gives
// ErrCorrupt naming the file and offset, and no restored file is put in
// place. Restored files are staged in Dir/.scrfs and renamed into place only
// once all of them check out. Afterwards the lost member also has a fresh
// redundancy file, so a later loss is survivable again.
//
// An empty lost list returns at once with nothing to do.
func Rebuild(ctx context.Context, p Params, m Member, lost []int, links Links, opts ...Option) (*Result, error) {
	start := time.Now()
	o := buildOptions(&p, opts)
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.validate(p); err != nil {
		return nil, err
	}
	lost, err := normLost(p, lost)
	if err != nil {
		return nil, err
	}
	if err := checkLost(p, lost); err != nil {
		return nil, fmt.Errorf("rebuild %s rank %d: %w", m.Dataset, m.Rank, err)
	}
	b := &rebuilder{p: p, m: m, o: o, lost: lost, path: redPath(p, m), isLost: make([]bool, p.Size)}
	if len(lost) == 0 {
		return &Result{File: b.path, Duration: time.Since(start)}, nil
	}
	for _, r := range lost {
		b.isLost[r] = true
	}
	b.amLost = b.isLost[m.Rank]
	s := newSession(ctx, links, m.Rank, p.Size, p.pieceSize(), o)
	err = b.run(s)
	s.close(err)
	b.cleanup()
	if err != nil {
		return nil, fmt.Errorf("rebuild %s rank %d: %w", m.Dataset, m.Rank, err)
	}
	var data int64
	if b.amLost {
		data = b.metas[m.Rank].Logical
	}
	o.log.Debug("rebuilt", "scheme", p.Kind.String(), "dataset", m.Dataset, "rank", m.Rank,
		"lost", lost, "duration", time.Since(start))
	return s.result(b.path, data, start), nil
}

// normLost returns the lost ranks sorted, checking range and duplicates.
func normLost(p Params, lost []int) ([]int, error) {
	out := slices.Clone(lost)
	slices.Sort(out)
	for i, r := range out {
		if r < 0 || r >= p.Size {
			return nil, fmt.Errorf("%w: lost rank %d not in [0, %d)", ErrInvalidParams, r, p.Size)
		}
		if i > 0 && out[i-1] == r {
			return nil, fmt.Errorf("%w: lost rank %d listed twice", ErrInvalidParams, r)
		}
	}
	return out, nil
}

// CanRebuild reports whether Rebuild could restore the given lost ranks:
// nil, ErrInvalidParams for a malformed list, or ErrTooManyLost naming why
// not. Callers use it to plan before asking every member to take part.
func (p Params) CanRebuild(lost []int) error {
	lost, err := normLost(p, lost)
	if err != nil {
		return err
	}
	return checkLost(p, lost)
}

// checkLost reports ErrTooManyLost if the lost ranks cannot be rebuilt.
func checkLost(p Params, lost []int) error {
	if len(lost) == 0 {
		return nil
	}
	switch p.Kind {
	case Single:
		return fmt.Errorf("%w: single keeps no redundancy data; lost ranks %v", ErrTooManyLost, lost)
	case XOR:
		if len(lost) > 1 {
			return fmt.Errorf("%w: xor rebuilds 1 lost member per set; lost ranks %v", ErrTooManyLost, lost)
		}
	case RS:
		if len(lost) > p.Parity {
			return fmt.Errorf("%w: rs with %d checksums rebuilds at most %d lost members; lost ranks %v", ErrTooManyLost, p.Parity, p.Parity, lost)
		}
	case Partner:
		for _, x := range lost {
			if _, ok := partnerHolder(p, x, lost); !ok {
				return fmt.Errorf("%w: partner: rank %d and all its %d holders %v are lost; lost ranks %v",
					ErrTooManyLost, x, p.Replicas, p.recorders(x), lost)
			}
		}
	}
	return nil
}

// rebuilder is one member's state during a rebuild.
type rebuilder struct {
	p      Params
	m      Member
	o      *options
	lost   []int
	isLost []bool
	amLost bool
	path   string

	// survivor: its checked redundancy file and own record
	rf  *redfile.File
	hdr *redfile.Header

	// agreed by the survivors
	chunk int64
	bs    int

	// lost member: records of itself and those it protects, staging
	metas map[int]*redfile.MemberMeta
	// copyCRCs tracks, for PARTNER, the files in each received copy.
	copyCRCs map[int]*fileCRCs
	stage    string
	lw       *logicalFile
	w        *redfile.Writer
}

func (b *rebuilder) alive(r int) bool { return !b.isLost[r] }

func (b *rebuilder) run(s *session) error {
	if b.amLost {
		// The dataset directory itself is not recorded; give a recreated
		// one the cache's usual mode before staging creates it.
		if err := os.MkdirAll(b.m.Dir, 0o755); err != nil {
			return s.fail(fmt.Errorf("create %s: %w", b.m.Dir, err))
		}
		b.stage = filepath.Join(b.m.Dir, layout.MetaDir, "rebuild.tmp")
		if err := os.RemoveAll(b.stage); err != nil {
			return s.fail(fmt.Errorf("clear %s: %w", b.stage, err))
		}
		if err := os.MkdirAll(b.stage, 0o700); err != nil {
			return s.fail(fmt.Errorf("create %s: %w", b.stage, err))
		}
	} else if err := b.openOwn(); err != nil {
		return s.fail(err)
	}
	hellos, err := s.sayHello(func(r int) hello {
		h := newHello("rebuild", b.p, b.m, b.lost)
		if !b.amLost {
			h.Logical, h.Chunk, h.BlockSize = b.hdr.Members[0].Logical, b.hdr.Chunk, b.hdr.BlockSize
			if b.isLost[r] {
				h.Metas = b.recordsFor(r)
			}
		}
		return h
	})
	if err != nil {
		return err
	}
	if err := b.agree(hellos); err != nil {
		return s.fail(err)
	}
	if b.amLost {
		if err := b.prepareLost(hellos); err != nil {
			return s.fail(err)
		}
	}
	switch b.p.Kind {
	case XOR:
		err = b.xor(s)
	case RS:
		err = b.rs(s)
	case Partner:
		err = b.partner(s)
	}
	if err != nil {
		return s.fail(err)
	}
	if b.amLost {
		if err := b.verifyLost(); err != nil {
			return s.fail(err)
		}
	}
	// Nothing is committed until every member has vouched for its inputs:
	// survivors check their own files' CRCs after the data phase, and a
	// damaged survivor file could otherwise leave a lost member with
	// wrong parity under a valid CRC.
	if err := s.barrier(); err != nil {
		return err
	}
	if b.amLost {
		if err := b.commitLost(); err != nil {
			return s.fail(err)
		}
	}
	return s.barrier()
}

// openOwn opens and checks this survivor's redundancy file and files.
func (b *rebuilder) openOwn() error {
	rf, err := redfile.Open(b.path)
	if err != nil {
		return err
	}
	b.rf, b.hdr = rf, rf.Header()
	if err := headerMatches(b.hdr, b.p, b.m); err != nil {
		return err
	}
	if bad := files.Missing(b.m.Dir, b.hdr.Members[0].Files); len(bad) > 0 {
		return fmt.Errorf("%w: rank %d is not intact (treat it as lost): %s", ErrMismatch, b.m.Rank, strings.Join(bad, "; "))
	}
	return nil
}

// headerMatches checks that a header belongs to member m of a set with
// parameters p. Of the recorded node list only this member's own entry must
// match: the others describe the set when it was encoded, and a spare node
// may since have taken a lost member's place.
func headerMatches(h *redfile.Header, p Params, m Member) error {
	want := newHeader(p, m, h.Chunk, nil)
	if h.Scheme != want.Scheme || h.Size != want.Size || h.Replicas != want.Replicas || h.Parity != want.Parity ||
		h.Group != want.Group || h.Groups != want.Groups || h.Rank != want.Rank ||
		h.Nodes[h.Rank] != want.Nodes[want.Rank] || h.Dataset != want.Dataset {
		return fmt.Errorf("%w: redundancy file is for %s %d/%d/%d group %d/%d rank %d on node %d dataset %q; want %s %d/%d/%d group %d/%d rank %d on node %d dataset %q",
			ErrMismatch, h.Scheme, h.Size, h.Replicas, h.Parity, h.Group, h.Groups, h.Rank, h.Nodes[h.Rank], h.Dataset,
			want.Scheme, want.Size, want.Replicas, want.Parity, want.Group, want.Groups, want.Rank, want.Nodes[want.Rank], want.Dataset)
	}
	return nil
}

// need returns the ranks whose records lost member x must end up with:
// itself, then those it protects.
func (b *rebuilder) need(x int) []int {
	return append([]int{x}, b.p.recorded(x)...)
}

// recordsFor returns the records this survivor holds of the ranks lost
// member x needs.
func (b *rebuilder) recordsFor(x int) []redfile.MemberMeta {
	var out []redfile.MemberMeta
	for _, y := range b.need(x) {
		if mm, ok := b.hdr.Member(y); ok {
			out = append(out, *mm)
		}
	}
	return out
}

// agree checks that all survivors encoded with the same chunk and block
// size and adopts them.
func (b *rebuilder) agree(hellos map[int]*hello) error {
	first := -1
	if !b.amLost {
		first, b.chunk, b.bs = b.m.Rank, b.hdr.Chunk, b.hdr.BlockSize
	}
	for r := 0; r < b.p.Size; r++ {
		h, ok := hellos[r]
		if !ok || b.isLost[r] {
			continue
		}
		if first < 0 {
			first, b.chunk, b.bs = r, h.Chunk, h.BlockSize
			continue
		}
		if h.Chunk != b.chunk || h.BlockSize != b.bs {
			return &PeerError{Rank: r, Err: fmt.Errorf("%w: chunk %d and block size %d, rank %d has %d and %d",
				ErrMismatch, h.Chunk, h.BlockSize, first, b.chunk, b.bs)}
		}
	}
	if b.bs < MinPieceSize || b.bs > MaxPieceSize || b.chunk < 0 {
		return fmt.Errorf("%w: survivors report block size %d, chunk %d", ErrProtocol, b.bs, b.chunk)
	}
	return nil
}

// cleanup releases files and removes staging leftovers.
func (b *rebuilder) cleanup() {
	if b.rf != nil {
		b.rf.Close()
	}
	if b.lw != nil {
		b.lw.close()
	}
	b.w.Abort()
	if b.stage != "" {
		os.RemoveAll(b.stage)
	}
}

// survivorSums checks this survivor's own files against their recorded
// CRCs, once a rebuild has read all of them: a damaged file would have
// poisoned the rebuilt data, and this names the culprit.
func (b *rebuilder) survivorSums(crcs *fileCRCs) error {
	sums, err := crcs.sums()
	if err != nil {
		return fmt.Errorf("internal error: survivor data not fully read: %w", err)
	}
	i := 0
	for _, f := range b.hdr.Members[0].Files {
		if f.Type != files.Regular {
			continue
		}
		if f.HasCRC && sums[i] != f.CRC32C {
			return fmt.Errorf("%w: %s has crc32c %08x, recorded %08x when encoded", ErrCorrupt, filepath.Join(b.m.Dir, f.Path), sums[i], f.CRC32C)
		}
		i++
	}
	return nil
}
