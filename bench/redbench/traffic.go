package main

import (
	"fmt"
	"strings"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// scheme is one redundancy scheme under test.
type scheme struct {
	kind     string // "partner", "xor" or "rs"
	replicas int    // PARTNER's r
	parity   int    // RS's k
}

// parseSchemes turns the -schemes list into schemes with the given
// parameters; it rejects names scrfs does not know and sets too small for
// them.
func parseSchemes(list string, nodes, replicas, parity int) ([]scheme, error) {
	var out []scheme
	for _, name := range strings.Split(list, ",") {
		s := scheme{kind: strings.TrimSpace(name), replicas: replicas, parity: parity}
		switch s.kind {
		case "partner":
			if replicas < 1 || replicas > nodes-1 {
				return nil, fmt.Errorf("-replicas %d: partner needs 1 ≤ r ≤ nodes−1 = %d", replicas, nodes-1)
			}
		case "xor":
			if nodes < 2 {
				return nil, fmt.Errorf("xor needs at least 2 nodes, have %d", nodes)
			}
		case "rs":
			if parity < 1 || parity > nodes-1 || nodes+parity > 256 {
				return nil, fmt.Errorf("-parity %d: rs needs 1 ≤ k ≤ nodes−1 = %d and nodes + k ≤ 256", parity, nodes-1)
			}
		default:
			return nil, fmt.Errorf("-schemes: unknown scheme %q (partner, xor, rs)", s.kind)
		}
		out = append(out, s)
	}
	return out, nil
}

func (s scheme) String() string {
	switch s.kind {
	case "partner":
		return fmt.Sprintf("partner(r=%d)", s.replicas)
	case "rs":
		return fmt.Sprintf("rs(k=%d)", s.parity)
	}
	return s.kind
}

// env returns the daemons' settings for the scheme.
func (s scheme) env() []string {
	return []string{
		"SCRFS_REDUNDANCY_SCHEME=" + s.kind,
		fmt.Sprintf("SCRFS_REDUNDANCY_REPLICAS=%d", s.replicas),
		fmt.Sprintf("SCRFS_REDUNDANCY_PARITY=%d", s.parity),
	}
}

// losses returns how many nodes the rebuild benchmark loses at once: one,
// and for RS also k (the most it tolerates). PARTNER with r copies
// tolerates r lost neighbours, but the issue asks for one.
func (s scheme) losses() []int {
	if s.kind == "rs" && s.parity > 1 {
		return []int{1, s.parity}
	}
	return []int{1}
}

// traffic[src][dst] is the number of payload bytes member src sends member
// dst while the set encodes (frame headers and control messages left out).
type traffic [][]int64

// schemeTraffic works out, from the algorithms of
// docs/formats-redundancy.md, what each of p members sends each other when
// every member's logical file is b bytes:
//
//   - PARTNER: member q sends its whole logical file to its holders
//     q+1..q+r: r·B per member.
//   - XOR: chunk c = ⌈B/(p−1)⌉; in the pipelined reduce-scatter a member
//     forwards the partial XOR of every row but its own (c bytes each) to
//     its right neighbour: (p−1)·c ≈ B per member.
//   - RS: chunk c = ⌈B/(p−k)⌉; member q contributes data to the p−k rows j
//     it holds no checksum of, and for each sends its contribution to each
//     of the row's k checksums (c bytes) straight to their holders
//     (j−i) mod p: (p−k)·k·c ≈ k·B per member, spread over several peers.
func schemeTraffic(s scheme, p int, b int64) traffic {
	t := make(traffic, p)
	for q := range t {
		t[q] = make([]int64, p)
	}
	mod := func(a int) int { return ((a % p) + p) % p }
	switch s.kind {
	case "partner":
		for q := range p {
			for d := 1; d <= s.replicas; d++ {
				t[q][mod(q+d)] += b
			}
		}
	case "xor":
		c := ceilDiv(b, int64(p-1))
		for q := range p {
			t[q][mod(q+1)] += int64(p-1) * c
		}
	case "rs":
		k := s.parity
		c := ceilDiv(b, int64(p-k))
		for q := range p {
			for j := range p {
				if mod(j-q) < k {
					continue // q holds checksum (j−q) of row j and contributes zeros
				}
				for i := range k {
					t[q][mod(j-i)] += c
				}
			}
		}
	}
	return t
}

// formula says in words how schemeTraffic counts a member's bytes.
func (s scheme) formula() string {
	switch s.kind {
	case "partner":
		return "r·B (whole file to r holders)"
	case "xor":
		return "(p−1)·⌈B/(p−1)⌉ ≈ B (ring, to the right)"
	case "rs":
		return "(p−k)·k·⌈B/(p−k)⌉ ≈ k·B (to each checksum holder)"
	}
	return ""
}

// reads returns what each member reads of its own logical file of b bytes
// while encoding: all of it, once, with every scheme (XOR's p−1 chunks and
// RS's p−k chunks cover it, up to the padding of the last chunk).
func (s scheme) reads(p int, b int64) int64 {
	switch s.kind {
	case "xor":
		return int64(p-1) * ceilDiv(b, int64(p-1))
	case "rs":
		return int64(p-s.parity) * ceilDiv(b, int64(p-s.parity))
	}
	return b
}

// stores returns the redundancy data each member writes into its cache:
// r copies (PARTNER), one chunk (XOR), k chunks (RS).
func (s scheme) stores(p int, b int64) int64 {
	switch s.kind {
	case "partner":
		return int64(s.replicas) * b
	case "xor":
		return ceilDiv(b, int64(p-1))
	case "rs":
		return int64(s.parity) * ceilDiv(b, int64(p-s.parity))
	}
	return 0
}

// sent returns what member src sends in all.
func (t traffic) sent(src int) int64 {
	var n int64
	for _, v := range t[src] {
		n += v
	}
	return n
}

// maxSent returns the most any member sends.
func (t traffic) maxSent() int64 {
	var m int64
	for q := range t {
		m = max(m, t.sent(q))
	}
	return m
}

// total returns the bytes the whole set moves.
func (t traffic) total() int64 {
	var n int64
	for q := range t {
		n += t.sent(q)
	}
	return n
}

// pattern describes where member 0's bytes go, e.g. "0→1 1.00 GiB".
func (t traffic) pattern() string {
	var parts []string
	for d, v := range t[0] {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("→%d %s", d, job.FormatBytes(v)))
		}
	}
	return "node 0 " + strings.Join(parts, ", ")
}

// ceilDiv is ⌈a/b⌉, at least 1: a chunk is never empty.
func ceilDiv(a, b int64) int64 { return max(1, (a+b-1)/b) }
