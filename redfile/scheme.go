package redfile

import (
	"fmt"
	"strings"

	"github.com/scrfs/scrfs/layout"
)

// Scheme is the redundancy a file was written under, as its header records
// it: the scheme's name (layout.KindSingle, KindPartner, KindXOR, KindRS;
// case does not matter), the set size p, PARTNER's number of copies R and
// RS's number of checksums k.
type Scheme struct {
	Kind     string
	Size     int
	Replicas int
	Parity   int
}

// kind returns the scheme's name as the constants write it.
func (s Scheme) kind() string { return strings.ToLower(s.Kind) }

// Check reports whether s can run on its set: p >= 1; PARTNER needs
// 1 <= R <= p-1, XOR p >= 2, RS 1 <= k < p and p + k <= 256 (GF(2^8)).
func (s Scheme) Check() error {
	if s.Size < 1 {
		return fmt.Errorf("size %d: a set needs at least one member", s.Size)
	}
	switch s.kind() {
	case layout.KindSingle:
	case layout.KindPartner:
		if s.Size < 2 {
			return fmt.Errorf("partner needs at least 2 members, have %d", s.Size)
		}
		if s.Replicas < 1 || s.Replicas > s.Size-1 {
			return fmt.Errorf("partner replicas %d not in [1, %d] for a set of %d", s.Replicas, s.Size-1, s.Size)
		}
	case layout.KindXOR:
		if s.Size < 2 {
			return fmt.Errorf("xor needs at least 2 members, have %d", s.Size)
		}
	case layout.KindRS:
		if s.Parity < 1 || s.Parity >= s.Size {
			return fmt.Errorf("rs parity %d not in [1, %d] for a set of %d", s.Parity, s.Size-1, s.Size)
		}
		if s.Size+s.Parity > layout.MaxRSShards {
			return fmt.Errorf("rs needs size+parity <= %d in GF(2^8), have %d+%d", layout.MaxRSShards, s.Size, s.Parity)
		}
	default:
		return fmt.Errorf("unknown scheme %q", s.Kind)
	}
	return nil
}

// Tolerance returns how many members of the set may lose their files and
// still be rebuilt: 0 for SINGLE, 1 for XOR, k for RS; R for PARTNER, the
// losses that are always survivable (more are, as long as no member is
// lost together with all of its R holders). It is also how many other
// members' metadata each member's file records, so that the metadata of
// every rebuildable loss survives.
func (s Scheme) Tolerance() int {
	switch s.kind() {
	case layout.KindPartner:
		return s.Replicas
	case layout.KindXOR:
		return 1
	case layout.KindRS:
		return s.Parity
	}
	return 0
}

// Recorded returns the ranks whose file metadata member rank records in its
// header besides its own, nearest left neighbour first: as a partner's
// copies go (layout.PartnerSources).
func (s Scheme) Recorded(rank int) []int {
	return layout.PartnerSources(s.Size, rank, s.Tolerance())
}

// Recorders returns the ranks that record member rank's metadata, nearest
// right neighbour first.
func (s Scheme) Recorders(rank int) []int {
	return layout.PartnerHolders(s.Size, rank, s.Tolerance())
}

// dataParts returns how many data chunks of a row a member's logical file
// is cut into: p-1 for XOR, p-k for RS, 0 for the schemes without chunks.
func (s Scheme) dataParts() int64 {
	switch s.kind() {
	case layout.KindXOR:
		return int64(s.Size - 1)
	case layout.KindRS:
		return int64(s.Size - s.Parity)
	}
	return 0
}
