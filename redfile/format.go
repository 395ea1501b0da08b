package redfile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/layout"
)

// Redundancy file layout (docs/formats-redundancy.md has the full story):
//
//	preamble  32 bytes  magic, version, flags, header length H, data length D,
//	                    block size BS, CRC32C of the preamble's first 28 bytes
//	data      D bytes   the segments listed in the header, back to back
//	header    H bytes   JSON (Header)
//	hdr CRC   4 bytes   CRC32C of the header bytes
//	trailer             u32 N, N u32 block CRC32Cs, u32 CRC32C of count+CRCs,
//	                    8-byte end magic
//
// The header follows the data because it records each file's CRC32C, known
// only once the data has streamed through; writing it last keeps encoding a
// single pass. The preamble is written last of all, at offset 0.
const (
	fileMagic = "SCRFSRED"
	endMagic  = "SCRFSEND"
	// Version is the format version this package writes and reads.
	Version = 1
	// PreambleSize is the length of the preamble, where the data begins.
	PreambleSize = 32
	// maxHeaderLen bounds what a decoder allocates for a header.
	maxHeaderLen = 256 << 20
	// maxDataLen bounds data lengths so offsets never overflow int64.
	maxDataLen = 1 << 60
)

// Block size bounds: each trailer CRC covers one block of a segment. The
// lower bound keeps per-block overhead sane (and lets tests exercise odd
// sizes); the upper bound fits the preamble's u32 field with room to spare
// and bounds what a reader holds of one block.
const (
	MinBlockSize = 64
	MaxBlockSize = 64 << 20
)

// Header is the decoded JSON header of a redundancy file.
type Header struct {
	Version  int    `json:"version"`
	Scheme   string `json:"scheme"`
	Size     int    `json:"size"`
	Replicas int    `json:"replicas,omitempty"`
	Parity   int    `json:"parity,omitempty"`
	Group    int    `json:"group"`
	Groups   int    `json:"groups"`
	// Nodes[rank] is the node index of each member.
	Nodes   []int  `json:"nodes"`
	Rank    int    `json:"rank"`
	Dataset string `json:"dataset"`
	// Chunk is the XOR or RS chunk size in bytes (0 for SINGLE, PARTNER).
	Chunk int64 `json:"chunk,omitempty"`
	// BlockSize is the data length each trailer CRC covers.
	BlockSize int `json:"block_size"`
	// Members[0] is this member; then those whose metadata it records,
	// nearest left neighbour first.
	Members []MemberMeta `json:"members"`
	// Segments tile the data region in order.
	Segments []Segment `json:"segments"`
}

// MemberMeta is one member's dataset as a header records it.
type MemberMeta struct {
	Rank int `json:"rank"`
	// Logical is the length of the member's logical file (its regular files).
	Logical int64        `json:"logical"`
	Files   []files.Meta `json:"files"`
}

// Segment is a run of the data region. For PARTNER, Rank is the member whose
// files it copies; for XOR it is this member and the segment is the parity of
// row Rank; for RS Index is the checksum number i (the row is Rank+i mod p).
type Segment struct {
	Rank   int   `json:"rank"`
	Index  int   `json:"index"`
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

// SchemeOf returns the scheme the header records.
func (h *Header) SchemeOf() Scheme {
	return Scheme{Kind: h.Scheme, Size: h.Size, Replicas: h.Replicas, Parity: h.Parity}
}

// Member returns the recorded metadata of rank r, if any.
func (h *Header) Member(r int) (*MemberMeta, bool) {
	for i := range h.Members {
		if h.Members[i].Rank == r {
			return &h.Members[i], true
		}
	}
	return nil, false
}

// dataLen returns the length of the data region the segments describe.
func (h *Header) dataLen() int64 {
	var n int64
	for _, s := range h.Segments {
		n += s.Length
	}
	return n
}

// blockCount returns how many trailer CRCs the segments need.
func (h *Header) blockCount() int64 {
	var n int64
	bs := int64(h.BlockSize)
	for _, s := range h.Segments {
		n += (s.Length + bs - 1) / bs
	}
	return n
}

// validate checks an untrusted header for internal consistency; errors are
// wrapped in ErrCorrupt by the caller.
func (h *Header) validate() error {
	if h.Version != Version {
		return fmt.Errorf("header version %d, want %d", h.Version, Version)
	}
	s := h.SchemeOf()
	if err := s.Check(); err != nil {
		return err
	}
	if len(h.Nodes) != h.Size || h.Rank < 0 || h.Rank >= h.Size {
		return fmt.Errorf("rank %d and %d nodes for a set of %d", h.Rank, len(h.Nodes), h.Size)
	}
	if h.Groups < 1 || h.Group < 0 || h.Group >= h.Groups {
		return fmt.Errorf("group %d of %d", h.Group, h.Groups)
	}
	if h.BlockSize < MinBlockSize || h.BlockSize > MaxBlockSize {
		return fmt.Errorf("block size %d", h.BlockSize)
	}
	if h.Chunk < 0 || h.Chunk > maxDataLen {
		return fmt.Errorf("chunk %d", h.Chunk)
	}
	want := append([]int{h.Rank}, s.Recorded(h.Rank)...)
	if len(h.Members) != len(want) {
		return fmt.Errorf("%d member records, want %d", len(h.Members), len(want))
	}
	for i, m := range h.Members {
		if m.Rank != want[i] {
			return fmt.Errorf("member record %d is rank %d, want %d", i, m.Rank, want[i])
		}
		if err := files.Check(m.Files); err != nil {
			return fmt.Errorf("rank %d: %w", m.Rank, err)
		}
		if files.Bytes(m.Files) != m.Logical {
			return fmt.Errorf("rank %d: logical size %d, files sum to %d", m.Rank, m.Logical, files.Bytes(m.Files))
		}
	}
	var at int64
	for i, sg := range h.Segments {
		if sg.Offset != at || sg.Length < 0 || sg.Length > maxDataLen-at {
			return fmt.Errorf("segment %d at %d+%d, want offset %d", i, sg.Offset, sg.Length, at)
		}
		at += sg.Length
	}
	return h.checkLayout(s)
}

// checkLayout checks that the segments are the ones scheme s writes
// (docs/formats-redundancy.md, "Data").
func (h *Header) checkLayout(s Scheme) error {
	var want []Segment
	switch s.kind() {
	case layout.KindPartner:
		for _, m := range h.Members[1:] {
			want = append(want, Segment{Rank: m.Rank, Length: m.Logical})
		}
	case layout.KindXOR:
		want = []Segment{{Rank: h.Rank, Length: h.Chunk}}
	case layout.KindRS:
		for i := 0; i < s.Parity; i++ {
			want = append(want, Segment{Rank: h.Rank, Index: i, Length: h.Chunk})
		}
	}
	if len(want) != len(h.Segments) {
		return fmt.Errorf("%d segments, want %d", len(h.Segments), len(want))
	}
	for i := range want {
		if got := h.Segments[i]; got.Rank != want[i].Rank || got.Index != want[i].Index || got.Length != want[i].Length {
			return fmt.Errorf("segment %d is %+v, want rank %d index %d length %d", i, got, want[i].Rank, want[i].Index, want[i].Length)
		}
	}
	if parts := s.dataParts(); parts > 0 {
		if h.Chunk < 1 {
			return fmt.Errorf("chunk %d", h.Chunk)
		}
		// Every recorded logical file must fit the data chunks of a row set.
		for _, m := range h.Members {
			if (m.Logical+parts-1)/parts > h.Chunk {
				return fmt.Errorf("rank %d: %d bytes do not fit %d chunks of %d", m.Rank, m.Logical, parts, h.Chunk)
			}
		}
	}
	return nil
}

// preamble is the fixed start of a redundancy file.
type preamble struct {
	version, flags uint16
	headerLen      uint32
	dataLen        uint64
	blockSize      uint32
}

func (p preamble) encode() []byte {
	b := make([]byte, PreambleSize)
	copy(b, fileMagic)
	binary.LittleEndian.PutUint16(b[8:], p.version)
	binary.LittleEndian.PutUint16(b[10:], p.flags)
	binary.LittleEndian.PutUint32(b[12:], p.headerLen)
	binary.LittleEndian.PutUint64(b[16:], p.dataLen)
	binary.LittleEndian.PutUint32(b[24:], p.blockSize)
	binary.LittleEndian.PutUint32(b[28:], crc32c.Checksum(b[:28]))
	return b
}

func decodePreamble(b []byte) (preamble, error) {
	var p preamble
	if len(b) < PreambleSize {
		return p, fmt.Errorf("preamble: %d bytes, want %d", len(b), PreambleSize)
	}
	if string(b[:8]) != fileMagic {
		return p, fmt.Errorf("bad magic %q", b[:8])
	}
	if got, want := crc32c.Checksum(b[:28]), binary.LittleEndian.Uint32(b[28:]); got != want {
		return p, fmt.Errorf("preamble crc32c %08x, recorded %08x", got, want)
	}
	p.version = binary.LittleEndian.Uint16(b[8:])
	p.flags = binary.LittleEndian.Uint16(b[10:])
	p.headerLen = binary.LittleEndian.Uint32(b[12:])
	p.dataLen = binary.LittleEndian.Uint64(b[16:])
	p.blockSize = binary.LittleEndian.Uint32(b[24:])
	switch {
	case p.version != Version:
		return p, fmt.Errorf("version %d, this build reads %d", p.version, Version)
	case p.flags != 0:
		return p, fmt.Errorf("unknown flags %#x", p.flags)
	case p.headerLen == 0 || p.headerLen > maxHeaderLen:
		return p, fmt.Errorf("header length %d", p.headerLen)
	case p.dataLen > maxDataLen:
		return p, fmt.Errorf("data length %d", p.dataLen)
	case p.blockSize < MinBlockSize || p.blockSize > MaxBlockSize:
		return p, fmt.Errorf("block size %d", p.blockSize)
	}
	return p, nil
}

// trailerLen returns the byte length of a trailer with n CRCs.
func trailerLen(n int64) int64 { return 4 + 4*n + 4 + int64(len(endMagic)) }

func encodeTrailer(crcs []uint32) []byte {
	b := make([]byte, trailerLen(int64(len(crcs))))
	binary.LittleEndian.PutUint32(b, uint32(len(crcs)))
	for i, c := range crcs {
		binary.LittleEndian.PutUint32(b[4+4*i:], c)
	}
	end := 4 + 4*len(crcs)
	binary.LittleEndian.PutUint32(b[end:], crc32c.Checksum(b[:end]))
	copy(b[end+4:], endMagic)
	return b
}

// decodeTrailer decodes a trailer that must hold exactly want CRCs.
func decodeTrailer(b []byte, want int64) ([]uint32, error) {
	if want < 0 || int64(len(b)) != trailerLen(want) {
		return nil, fmt.Errorf("trailer of %d bytes, want %d CRCs", len(b), want)
	}
	if n := binary.LittleEndian.Uint32(b); int64(n) != want {
		return nil, fmt.Errorf("trailer holds %d CRCs, want %d", n, want)
	}
	end := 4 + 4*int(want)
	if got, rec := crc32c.Checksum(b[:end]), binary.LittleEndian.Uint32(b[end:]); got != rec {
		return nil, fmt.Errorf("trailer crc32c %08x, recorded %08x", got, rec)
	}
	if string(b[end+4:]) != endMagic {
		return nil, fmt.Errorf("bad end magic %q", b[end+4:])
	}
	crcs := make([]uint32, want)
	for i := range crcs {
		crcs[i] = binary.LittleEndian.Uint32(b[4+4*i:])
	}
	return crcs, nil
}

// redLayout is a decoded redundancy file minus its data.
type redLayout struct {
	pre  preamble
	hdr  *Header
	crcs []uint32
	size int64
}

func (l *redLayout) headerOff() int64 { return PreambleSize + int64(l.pre.dataLen) }

// readLayout reads and checks everything but the data of a redundancy file
// of the given size: preamble, header, trailer, their CRCs and that all
// lengths agree. Errors wrap ErrCorrupt (or the read error).
func readLayout(r io.ReaderAt, size int64, name string) (*redLayout, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{ErrCorrupt, name}, args...)...)
	}
	pb := make([]byte, PreambleSize)
	if size < PreambleSize {
		return nil, corrupt("%d bytes, shorter than the preamble", size)
	}
	if _, err := r.ReadAt(pb, 0); err != nil {
		return nil, fmt.Errorf("read preamble %s: %w", name, err)
	}
	pre, err := decodePreamble(pb)
	if err != nil {
		return nil, corrupt("%v", err)
	}
	l := &redLayout{pre: pre, size: size}
	hOff := l.headerOff()
	if hOff+int64(pre.headerLen)+4 > size {
		return nil, corrupt("file of %d bytes cannot hold %d data and %d header bytes", size, pre.dataLen, pre.headerLen)
	}
	hb := make([]byte, int(pre.headerLen)+4)
	if _, err := r.ReadAt(hb, hOff); err != nil {
		return nil, fmt.Errorf("read header %s: %w", name, err)
	}
	hcrc := binary.LittleEndian.Uint32(hb[pre.headerLen:])
	hb = hb[:pre.headerLen]
	if got := crc32c.Checksum(hb); got != hcrc {
		return nil, corrupt("header at offset %d: crc32c %08x, recorded %08x", hOff, got, hcrc)
	}
	h := new(Header)
	dec := json.NewDecoder(bytes.NewReader(hb))
	dec.DisallowUnknownFields()
	if err := dec.Decode(h); err != nil {
		return nil, corrupt("header: %v", err)
	}
	if err := h.validate(); err != nil {
		return nil, corrupt("header: %v", err)
	}
	if h.BlockSize != int(pre.blockSize) || h.dataLen() != int64(pre.dataLen) {
		return nil, corrupt("header block size %d / data %d disagree with preamble %d / %d", h.BlockSize, h.dataLen(), pre.blockSize, pre.dataLen)
	}
	l.hdr = h
	n := h.blockCount()
	tOff := hOff + int64(pre.headerLen) + 4
	if size-tOff != trailerLen(n) {
		return nil, corrupt("trailer at offset %d is %d bytes, want %d", tOff, size-tOff, trailerLen(n))
	}
	tb := make([]byte, trailerLen(n))
	if _, err := r.ReadAt(tb, tOff); err != nil {
		return nil, fmt.Errorf("read trailer %s: %w", name, err)
	}
	if l.crcs, err = decodeTrailer(tb, n); err != nil {
		return nil, corrupt("trailer at offset %d: %v", tOff, err)
	}
	return l, nil
}

// ReadHeader reads and checks the header of the redundancy file at path:
// preamble and header CRCs, header consistency, and that the trailer is
// intact and as long as the header says. It does not read the data (Inspect
// does). Errors wrap ErrCorrupt for damaged files.
func ReadHeader(path string) (*Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	l, err := readLayout(f, st.Size(), path)
	if err != nil {
		return nil, err
	}
	return l.hdr, nil
}

// encodeHeader returns the JSON header bytes followed by their CRC32C.
func encodeHeader(h *Header) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	if len(b) > maxHeaderLen {
		return nil, fmt.Errorf("encode header: %d bytes exceeds %d", len(b), maxHeaderLen)
	}
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b)), nil
}
