package schemes

import (
	"fmt"
	"strings"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/redfile"
)

// Kind names a redundancy scheme.
type Kind uint8

// The redundancy schemes, as redset defines them.
const (
	// Single stores no redundancy data: a header with the member's own file
	// metadata lets a restart verify its files.
	Single Kind = iota + 1
	// Partner stores full copies of the files of the Replicas members to the
	// left.
	Partner
	// XOR stores one parity chunk per member; one lost member per set can be
	// rebuilt.
	XOR
	// RS stores Parity Reed-Solomon checksum chunks per member; up to Parity
	// lost members per set can be rebuilt.
	RS
)

// String returns the scheme's name as redundancy file names and
// configuration write it: "single", "partner", "xor", "rs".
func (k Kind) String() string {
	switch k {
	case Single:
		return "single"
	case Partner:
		return "partner"
	case XOR:
		return "xor"
	case RS:
		return "rs"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind returns the Kind named s (case-insensitive: "single", "partner",
// "xor", "rs"); other names give an error wrapping ErrInvalidParams.
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(s) {
	case "single":
		return Single, nil
	case "partner":
		return Partner, nil
	case "xor":
		return XOR, nil
	case "rs":
		return RS, nil
	}
	return 0, fmt.Errorf("%w: unknown scheme %q (want single, partner, xor or rs)", ErrInvalidParams, s)
}

// DefaultPieceSize is the pipelining granularity when Params.PieceSize is 0:
// large enough that per-message costs (syscalls, goroutine hand-offs,
// progress and CRC bookkeeping) vanish next to moving the bytes, small
// enough that a dozen pieces in flight stay a few tens of MiB. 4 MiB
// measured 12% less CPU than 1 MiB for RS on a 2-core VM.
const DefaultPieceSize = 4 << 20

// Piece size bounds: a piece is a block of the redundancy files Encode
// writes (one trailer CRC each), so they are the format's block size
// bounds, which also keep per-message overhead sane and memory per link
// bounded.
const (
	MinPieceSize = redfile.MinBlockSize
	MaxPieceSize = redfile.MaxBlockSize
)

// Params are a set's redundancy parameters. All members of an operation must
// pass identical Params; the members check this in their first exchange and
// fail with ErrMismatch otherwise.
type Params struct {
	Kind Kind
	// Size is p, the number of members in the set.
	Size int
	// Replicas is PARTNER's number of copies r, 1 <= r <= p-1.
	Replicas int
	// Parity is RS's number of checksums k, 1 <= k < p, p+k <= 256.
	Parity int
	// PieceSize is the pipelining granularity in bytes (0 = DefaultPieceSize).
	// It is also the CRC block size of the redundancy files Encode writes.
	PieceSize int
}

// Validate reports whether p describes a runnable set; errors wrap
// ErrInvalidParams and name the field.
func (p Params) Validate() error {
	if p.PieceSize != 0 && (p.PieceSize < MinPieceSize || p.PieceSize > MaxPieceSize) {
		return fmt.Errorf("%w: piece size %d not in [%d, %d]", ErrInvalidParams, p.PieceSize, MinPieceSize, MaxPieceSize)
	}
	if err := p.format().Check(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidParams, err)
	}
	return nil
}

// format returns the scheme as the redundancy files record it, whose rules
// (which sets it runs on, whose metadata a member records) the format
// defines.
func (p Params) format() redfile.Scheme {
	return redfile.Scheme{Kind: p.Kind.String(), Size: p.Size, Replicas: p.Replicas, Parity: p.Parity}
}

// Tolerance returns how many members of the set may lose their files and
// still be rebuilt: 0 for SINGLE, 1 for XOR, Parity for RS. For PARTNER it
// returns Replicas, the number of losses that are always survivable; more
// losses are survivable as long as no member is lost together with all of
// its Replicas holders (Rebuild checks exactly that).
func (p Params) Tolerance() int { return p.format().Tolerance() }

// pieceSize returns the effective piece size.
func (p Params) pieceSize() int {
	if p.PieceSize == 0 {
		return DefaultPieceSize
	}
	return p.PieceSize
}

// recorded returns the ranks whose file metadata member r records in its
// header besides its own, nearest left neighbour first.
func (p Params) recorded(r int) []int { return p.format().Recorded(r) }

// recorders returns the ranks that record member r's metadata, nearest right
// neighbour first.
func (p Params) recorders(r int) []int { return p.format().Recorders(r) }

// SetInfo describes the redundancy set of an operation.
type SetInfo struct {
	// Group is this set's index among Groups sets of the job.
	Group, Groups int
	// Nodes[rank] is the node index of each member; it names redundancy
	// files and is recorded in their headers.
	Nodes []int
}

// Member is one member's view of an operation. Dir is owned by the caller;
// the operation writes only Dir/.scrfs/ (redundancy files) and, when
// rebuilding this member, the dataset's files under Dir.
type Member struct {
	Rank    int
	Set     SetInfo
	Dataset string // dataset name, recorded in headers
	Dir     string // dataset directory in the cache
	// Files is what the member holds under Dir, as the dataset's record
	// lists it (files.Scan made it at completion): what Encode reads, in
	// this order, and records. Encode does not walk Dir; a file it finds of
	// another type or size than listed fails it (ErrMismatch), and a file
	// not listed is not protected, which is right only because a completed
	// dataset does not change. Rebuild and Inspect ignore it: the
	// redundancy files list what they restore and check.
	Files []files.Meta
}

func (m Member) validate(p Params) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidParams}, args...)...)
	}
	if m.Rank < 0 || m.Rank >= p.Size {
		return bad("rank %d not in [0, %d)", m.Rank, p.Size)
	}
	if len(m.Set.Nodes) != p.Size {
		return bad("set lists %d nodes for %d members", len(m.Set.Nodes), p.Size)
	}
	for i, n := range m.Set.Nodes {
		if n < 0 {
			return bad("node index %d of rank %d is negative", n, i)
		}
	}
	if m.Set.Groups < 1 || m.Set.Group < 0 || m.Set.Group >= m.Set.Groups {
		return bad("group %d not in [0, %d)", m.Set.Group, m.Set.Groups)
	}
	if m.Dir == "" {
		return bad("empty dataset directory")
	}
	if m.Dataset == "" || strings.ContainsAny(m.Dataset, "/\x00") {
		return bad("dataset name %q", m.Dataset)
	}
	return nil
}

// mod returns a mod p in [0, p).
func mod(a, p int) int {
	a %= p
	if a < 0 {
		a += p
	}
	return a
}
