package schemes

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/redfile"
)

// Encode runs this member's part of encoding its set: all members call it
// concurrently with the same Params. It reads the files m.Files lists from
// m.Dir, exchanges file metadata, streams data with the other members, and
// writes this member's redundancy file
// Dir/.scrfs/<node>.<kind>.grp_<g>_of_<n>.mem_<r>_of_<p>.redset (via a
// .tmp file, fsync and rename), removing this node's older redundancy files
// there first. It returns only once every member has written its file; if
// any member fails, all return an error (a PeerError for the others).
//
// The dataset must not change while Encode runs nor since m.Files was
// made; a file whose type or size is not as listed is reported with
// ErrMismatch. SINGLE needs no network and ignores links.
func Encode(ctx context.Context, p Params, m Member, links Links, opts ...Option) (*Result, error) {
	start := time.Now()
	o := buildOptions(&p, opts)
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.validate(p); err != nil {
		return nil, err
	}
	e := &encoder{p: p, m: m, o: o, path: redPath(p, m)}
	if p.Kind == Single {
		if err := e.single(); err != nil {
			return nil, fmt.Errorf("encode %s rank %d: %w", m.Dataset, m.Rank, err)
		}
		return &Result{File: e.path, DataBytes: e.logical, Duration: time.Since(start)}, nil
	}
	// Everything that can fail runs inside the session, so a failure here
	// reaches the other members as an abort instead of leaving them waiting.
	s := newSession(ctx, links, m.Rank, p.Size, p.pieceSize(), o)
	err := e.run(s)
	s.close(err)
	if err != nil {
		return nil, fmt.Errorf("encode %s rank %d: %w", m.Dataset, m.Rank, err)
	}
	o.log.Debug("encoded", "scheme", p.Kind.String(), "dataset", m.Dataset, "rank", m.Rank,
		"bytes", e.logical, "duration", time.Since(start))
	return s.result(e.path, e.logical, start), nil
}

type encoder struct {
	p       Params
	m       Member
	o       *options
	logical int64 // of m.Files
	path    string
}

// header returns the header skeleton of this member's file.
func (e *encoder) header(chunk int64, members []redfile.MemberMeta) *redfile.Header {
	return newHeader(e.p, e.m, chunk, members)
}

func newHeader(p Params, m Member, chunk int64, members []redfile.MemberMeta) *redfile.Header {
	h := &redfile.Header{
		Version: redfile.Version, Scheme: p.Kind.String(), Size: p.Size,
		Group: m.Set.Group, Groups: m.Set.Groups, Nodes: m.Set.Nodes, Rank: m.Rank,
		Dataset: m.Dataset, Chunk: chunk, Members: members,
	}
	switch p.Kind {
	case Partner:
		h.Replicas = p.Replicas
	case RS:
		h.Parity = p.Parity
	}
	return h
}

// checkList checks the member's file list before anything is read by it:
// it may have come from disk or a peer, and its paths become the paths
// read.
func (e *encoder) checkList() error {
	if err := files.Check(e.m.Files); err != nil {
		return fmt.Errorf("%w: file list of %s: %v", ErrInvalidParams, e.m.Dir, err)
	}
	e.logical = files.Bytes(e.m.Files)
	return nil
}

func (e *encoder) single() error {
	if err := e.checkList(); err != nil {
		return err
	}
	// SINGLE reads no data, so nothing else would notice a file that is
	// not as listed: its header must not vouch for it.
	if bad := files.Missing(e.m.Dir, e.m.Files); len(bad) > 0 {
		return fmt.Errorf("%w: %d entries missing or changed: %s", ErrMismatch, len(bad), strings.Join(bad, "; "))
	}
	w, err := redfile.Create(e.path, e.m.Set.Nodes[e.m.Rank], e.p.pieceSize(), nil, nil)
	if err != nil {
		return err
	}
	defer w.Abort()
	own := redfile.MemberMeta{Rank: e.m.Rank, Logical: e.logical, Files: e.m.Files}
	return w.Finish(e.header(0, []redfile.MemberMeta{own}))
}

// run is the networked part of Encode.
func (e *encoder) run(s *session) error {
	if err := e.checkList(); err != nil {
		return s.fail(err)
	}
	hellos, err := s.sayHello(func(int) hello {
		h := newHello("encode", e.p, e.m, nil)
		h.Logical = e.logical
		return h
	})
	if err != nil {
		return err
	}
	// Every member now knows every logical size, hence the same chunk size
	// (redset's allreduce of the maximum) and its sources' segment lengths.
	sizes := make(map[int]int64, e.p.Size)
	sizes[e.m.Rank] = e.logical
	maxSize := e.logical
	for r, h := range hellos {
		sizes[r] = h.Logical
		maxSize = max(maxSize, h.Logical)
	}

	var segs []redfile.Segment
	var chunk int64
	switch e.p.Kind {
	case Partner:
		for _, r := range e.p.recorded(e.m.Rank) {
			segs = append(segs, redfile.Segment{Rank: r, Length: sizes[r]})
		}
	case XOR:
		chunk = chunkSize(maxSize, e.p.Size-1)
		segs = []redfile.Segment{{Rank: e.m.Rank, Length: chunk}}
	case RS:
		chunk = chunkSize(maxSize, e.p.Size-e.p.Parity)
		for i := 0; i < e.p.Parity; i++ {
			segs = append(segs, redfile.Segment{Rank: e.m.Rank, Index: i, Length: chunk})
		}
	}
	w, err := redfile.Create(e.path, e.m.Set.Nodes[e.m.Rank], e.p.pieceSize(), segs, e.o.spare)
	if err != nil {
		return s.fail(err)
	}
	defer w.Abort()

	// The data phase reads every byte of this member's files exactly once,
	// in whatever order the scheme needs; the tracker assembles each file's
	// CRC32C from those pieces for the header.
	crcs := newFileCRCs(e.m.Files)
	lr := newLogicalReader(e.m.Dir, e.m.Files, crcs)
	defer lr.close()
	var dataLen int64
	for _, sg := range segs {
		dataLen += sg.Length
	}
	switch e.p.Kind {
	case Partner:
		s.total = e.logical + dataLen
		err = partnerEncode(s, e.p, e.m.Rank, sizes, lr, w)
	case XOR:
		s.total = int64(e.p.Size-1)*chunk + dataLen
		err = xorEncode(s, e.p, e.m.Rank, chunk, lr, w)
	case RS:
		s.total = int64(e.p.Size-e.p.Parity)*chunk + dataLen
		err = rsEncode(s, e.p, e.m.Rank, chunk, lr, w)
	}
	if err != nil {
		return s.fail(err)
	}
	sums, err := crcs.sums()
	if err != nil {
		return s.fail(fmt.Errorf("internal error: file checksums: %w", err))
	}
	list := withCRCs(e.m.Files, sums)

	// Metadata goes to the recorders only now, with the CRCs; it is small,
	// and the members that record it write their headers last anyway.
	own := redfile.MemberMeta{Rank: e.m.Rank, Logical: e.logical, Files: list}
	rec := e.p.recorded(e.m.Rank)
	metas, err := s.sendMeta(&own, e.p.recorders(e.m.Rank), rec, sizes)
	if err != nil {
		return err
	}
	members := []redfile.MemberMeta{own}
	for _, r := range rec {
		members = append(members, *metas[r])
	}
	if err := w.Finish(e.header(chunk, members)); err != nil {
		return s.fail(err)
	}
	// Success means the whole set is protected, not just this member.
	return s.barrier()
}

// chunkSize returns ⌈max/parts⌉, at least 1 as redset does, so empty sets
// still produce well-formed files.
func chunkSize(maxSize int64, parts int) int64 {
	c := (maxSize + int64(parts) - 1) / int64(parts)
	return max(c, 1)
}

// withCRCs returns a copy of files with the regular files' CRCs set.
func withCRCs(list []files.Meta, sums []uint32) []files.Meta {
	out := make([]files.Meta, len(list))
	copy(out, list)
	i := 0
	for j := range out {
		if out[j].Type == files.Regular {
			out[j].CRC32C, out[j].HasCRC = sums[i], true
			i++
		}
	}
	return out
}

// pieces returns how many pieces of size piece cover n bytes.
func pieces(n int64, piece int) int {
	return int((n + int64(piece) - 1) / int64(piece))
}

// group runs fns concurrently; the first failure fails the session (which
// stops the others) and is returned.
func (s *session) group(fns ...func() error) error {
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				s.fail(err)
			}
		}()
	}
	wg.Wait()
	return s.err()
}
