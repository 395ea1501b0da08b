package layout

import (
	"cmp"
	"slices"
)

// arrangeRing orders the members of one set into ring (rank) order; members
// arrive ordered by domain path and node index.
//
// Goal, in priority order: ring neighbours (distance 1) in distinct domains,
// outermost level first; then members at distance 2, 3, ... in distinct
// domains, which is what PARTNER with r replicas needs (rank i's holders are
// i+1..i+r). ringCost turns that into a vector compared lexicographically,
// and the cheapest of a few deterministic constructions wins (the first on a
// tie), so every node computes the same ring:
//
//   - the members as given: all that is needed when domains are distinct;
//   - the even-odd fill: members grouped by domain (largest domains first)
//     are written to ring positions 0, 2, 4, ... and then 1, 3, 5, ...; no
//     two neighbours share a domain whenever no domain holds more than half
//     of the set, the bound beyond which that is impossible;
//   - the bucket deal for each level: the same grouped sequence is dealt
//     round-robin into k buckets, k being the largest domain's member count
//     at that level, and the buckets are concatenated, which keeps members of
//     one domain about p/k ranks apart (ABCABC rather than ABACBC).
//
// Small sets are then polished by pairwise swaps. The neighbour part of the
// cost is checked against exhaustive search in the tests.
func arrangeRing(members []Node, depth int) []Node {
	p := len(members)
	if p <= 2 || depth == 0 {
		return slices.Clone(members)
	}
	keys := ringKeys(members, depth)
	seq := groupedOrder(members, keys, depth)

	best := make([]int, p)
	for i := range best {
		best[i] = i
	}
	bestCost := ringCost(nil, best, keys, depth)
	consider := func(cand []int) {
		if c := ringCost(nil, cand, keys, depth); slices.Compare(c, bestCost) < 0 {
			best, bestCost = cand, c
		}
	}
	consider(evenOddFill(seq))
	tried := map[int]bool{}
	for l := 1; l <= depth; l++ {
		k := largestDomain(seq, keys, l)
		if k < 2 || k >= p || tried[k] {
			continue
		}
		tried[k] = true
		consider(bucketDeal(seq, k))
	}
	if p <= maxPolishedRing {
		best = polishRing(best, bestCost, keys, depth)
	}
	// Every rotation has the same cost; start at the lowest node index so
	// the ring reads naturally and does not depend on the search order.
	start := 0
	for i, m := range best {
		if members[m].Index < members[best[start]].Index {
			start = i
		}
	}
	out := make([]Node, p)
	for i := range best {
		out[i] = members[best[(start+i)%p]]
	}
	return out
}

// ringKeys gives every member an integer id per level (keys[l-1][i]) so that
// two members share a level-l domain exactly when their ids are equal.
func ringKeys(members []Node, depth int) [][]int {
	keys := make([][]int, depth)
	for l := 1; l <= depth; l++ {
		ids := map[string]int{}
		keys[l-1] = make([]int, len(members))
		for i, n := range members {
			k := domainKey(n, l)
			id, ok := ids[k]
			if !ok {
				id = len(ids)
				ids[k] = id
			}
			keys[l-1][i] = id
		}
	}
	return keys
}

// groupedOrder returns member positions sorted so that every domain, at every
// level, is one contiguous run, larger domains before smaller ones (ties by
// domain path), then by node index.
func groupedOrder(members []Node, keys [][]int, depth int) []int {
	counts := make([]map[int]int, depth)
	for l := range counts {
		counts[l] = map[int]int{}
		for _, id := range keys[l] {
			counts[l][id]++
		}
	}
	seq := make([]int, len(members))
	for i := range seq {
		seq[i] = i
	}
	slices.SortFunc(seq, func(a, b int) int {
		for l := 0; l < depth; l++ {
			if c := cmp.Compare(counts[l][keys[l][b]], counts[l][keys[l][a]]); c != 0 {
				return c
			}
			if c := cmp.Compare(domainKey(members[a], l+1), domainKey(members[b], l+1)); c != 0 {
				return c
			}
		}
		return cmp.Compare(members[a].Index, members[b].Index)
	})
	return seq
}

// largestDomain returns the member count of the biggest level-l domain.
func largestDomain(seq []int, keys [][]int, l int) int {
	counts := map[int]int{}
	best := 0
	for _, m := range seq {
		id := keys[l-1][m]
		counts[id]++
		best = max(best, counts[id])
	}
	return best
}

// evenOddFill writes seq to ring positions 0, 2, 4, ... then 1, 3, 5, ....
func evenOddFill(seq []int) []int {
	p := len(seq)
	ring := make([]int, p)
	half := (p + 1) / 2
	for i, m := range seq {
		if i < half {
			ring[2*i] = m
		} else {
			ring[2*(i-half)+1] = m
		}
	}
	return ring
}

// bucketDeal deals seq round-robin into k buckets and concatenates them.
func bucketDeal(seq []int, k int) []int {
	ring := make([]int, 0, len(seq))
	for b := 0; b < k; b++ {
		for i := b; i < len(seq); i += k {
			ring = append(ring, seq[i])
		}
	}
	return ring
}

// maxRingDistance bounds the distances ringCost looks at: PARTNER replicas
// beyond this are not worth optimising for, and the bound keeps the cost
// linear in the set size for very large sets.
const maxRingDistance = 32

// ringCost counts, for each ring distance d = 1..min(p/2, maxRingDistance)
// and each level from the outermost in, the member pairs d apart that share a
// domain. Vectors compare lexicographically: neighbours first, outer levels
// before inner ones. The result is appended to dst[:0].
func ringCost(dst, ring []int, keys [][]int, depth int) []int {
	p := len(ring)
	cost := dst[:0]
	for d := 1; d <= min(p/2, maxRingDistance); d++ {
		for l := 0; l < depth; l++ {
			n := 0
			for i := 0; i < p; i++ {
				if keys[l][ring[i]] == keys[l][ring[(i+d)%p]] {
					n++
				}
			}
			cost = append(cost, n)
		}
	}
	return cost
}

// maxPolishedRing bounds the set size for which polishRing runs; its cost
// grows as p^3 * min(p, maxRingDistance), and SCR-sized sets (8) are far
// below the bound.
const maxPolishedRing = 24

// polishRing improves a ring by swapping two members whenever that lowers the
// cost vector, until no swap helps (or a few passes have run). Only strict
// improvements are taken, so neighbours never get worse than the
// construction made them; the fixed scan order keeps the result
// deterministic.
func polishRing(ring, cost []int, keys [][]int, depth int) []int {
	ring = slices.Clone(ring)
	cost = slices.Clone(cost)
	scratch := make([]int, 0, len(cost))
	for pass := 0; pass < 8; pass++ {
		improved := false
		for i := 0; i < len(ring); i++ {
			for j := i + 1; j < len(ring); j++ {
				ring[i], ring[j] = ring[j], ring[i]
				if scratch = ringCost(scratch, ring, keys, depth); slices.Compare(scratch, cost) < 0 {
					cost, scratch = scratch, cost
					improved = true
					continue
				}
				ring[i], ring[j] = ring[j], ring[i]
			}
		}
		if !improved {
			break
		}
	}
	return ring
}
