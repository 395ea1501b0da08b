package layout

import (
	"fmt"
	"strings"
)

// Scheme kinds, as written in the configuration and in redundancy file names.
const (
	KindSingle  = "single"
	KindPartner = "partner"
	KindXOR     = "xor"
	KindRS      = "rs"
)

// MaxRSShards is the most data plus parity shards a Reed-Solomon set can have
// in GF(2^8): p + k <= 256.
const MaxRSShards = 256

// Scheme is the redundancy scheme of a job: one per job.
type Scheme struct {
	// Kind is KindSingle, KindPartner, KindXOR or KindRS.
	Kind string `json:"kind"`
	// Replicas is PARTNER's number of copies r (1 <= r <= p-1); ignored
	// by the other kinds.
	Replicas int `json:"replicas,omitempty"`
	// Parity is RS's number of checksums k (1 <= k < p, p+k <= 256);
	// ignored by the other kinds.
	Parity int `json:"parity,omitempty"`
}

// String writes the scheme as a user would configure it: "xor",
// "partner(replicas=2)", "rs(parity=2)".
func (s Scheme) String() string {
	switch s.Kind {
	case KindPartner:
		return fmt.Sprintf("%s(replicas=%d)", s.Kind, s.Replicas)
	case KindRS:
		return fmt.Sprintf("%s(parity=%d)", s.Kind, s.Parity)
	}
	return s.Kind
}

// CheckScheme reports whether s can run on every set of the layout: lower
// bounds against the smallest set, RS's p + k <= 256 against the largest.
// SINGLE runs on any set; XOR needs at least 2 members; PARTNER needs
// 1 <= replicas <= p-1; RS needs 1 <= parity < p and p + parity <= 256. The
// error wraps ErrScheme and says what is allowed, e.g. "redundancy.parity = 4
// needs sets of at least 5 nodes (1 <= k < p); the smallest set has 4".
func (l *Layout) CheckScheme(s Scheme) error {
	return checkScheme(s, l.MinSetSize(), l.MaxSetSize())
}

func checkScheme(s Scheme, minP, maxP int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrScheme}, args...)...)
	}
	if minP < 1 {
		return bad("sets need at least one member; the smallest set has %d", minP)
	}
	switch s.Kind {
	case KindSingle:
		return nil
	case KindXOR:
		if minP < 2 {
			return bad("redundancy.scheme = xor needs sets of at least 2 nodes; the smallest set has %d (use single, or more nodes)", minP)
		}
		return nil
	case KindPartner:
		r := s.Replicas
		if r < 1 {
			return bad("redundancy.replicas = %d must be at least 1", r)
		}
		if r > minP-1 {
			return bad("redundancy.replicas = %d needs sets of at least %d nodes (1 <= r <= p-1); the smallest set has %d", r, r+1, minP)
		}
		return nil
	case KindRS:
		k := s.Parity
		if k < 1 {
			return bad("redundancy.parity = %d must be at least 1", k)
		}
		if k >= minP {
			return bad("redundancy.parity = %d needs sets of at least %d nodes (1 <= k < p); the smallest set has %d", k, k+1, minP)
		}
		if maxP+k > MaxRSShards {
			return bad("redundancy.parity = %d allows sets of at most %d nodes (p + k <= %d in GF(2^8)); the largest set has %d",
				k, MaxRSShards-k, MaxRSShards, maxP)
		}
		return nil
	}
	return bad("redundancy.scheme = %q is not one of %s", short(s.Kind), strings.Join([]string{KindSingle, KindPartner, KindXOR, KindRS}, ", "))
}

// validRank reports whether rank names a member of a set of p.
func validRank(p, rank int) bool { return p >= 1 && rank >= 0 && rank < p }

// PartnerHolders returns the ranks that store copies of rank's files under
// PARTNER with r replicas in a set of p: rank+1, ..., rank+r (mod p), nearest
// first. It returns nil unless 0 <= rank < p and 1 <= r <= p-1.
func PartnerHolders(p, rank, r int) []int {
	if !validRank(p, rank) || r < 1 || r > p-1 {
		return nil
	}
	out := make([]int, r)
	for i := range out {
		out[i] = (rank + i + 1) % p
	}
	return out
}

// PartnerSources returns the ranks whose copies rank stores under PARTNER
// with r replicas in a set of p: rank-1, ..., rank-r (mod p), nearest first,
// which is the order their data follows the header in rank's partner file.
// It returns nil unless 0 <= rank < p and 1 <= r <= p-1.
func PartnerSources(p, rank, r int) []int {
	if !validRank(p, rank) || r < 1 || r > p-1 {
		return nil
	}
	out := make([]int, r)
	for i := range out {
		out[i] = ((rank-i-1)%p + p) % p
	}
	return out
}

// Left returns rank's left ring neighbour in a set of p (rank-1 mod p), from
// which XOR's reduce-scatter receives; -1 unless 0 <= rank < p.
func Left(p, rank int) int {
	if !validRank(p, rank) {
		return -1
	}
	return (rank - 1 + p) % p
}

// Right returns rank's right ring neighbour in a set of p (rank+1 mod p), to
// which XOR's reduce-scatter sends and which keeps a copy of rank's file
// metadata; -1 unless 0 <= rank < p.
func Right(p, rank int) int {
	if !validRank(p, rank) {
		return -1
	}
	return (rank + 1) % p
}

// RSHolder returns the member that stores checksum i (0 <= i < k) of row
// (0 <= row < p) in an RS set of p: (row - i) mod p. That member contributes
// zeros to the row. It returns -1 for p < 1, a row outside 0..p-1 or a
// negative i.
func RSHolder(p, row, i int) int {
	if !validRank(p, row) || i < 0 {
		return -1
	}
	return ((row-i)%p + p) % p
}
