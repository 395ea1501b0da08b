package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/scrfs/scrfs/record"
)

// Where the shares of a dataset are: a rebuild in a job of another order
// or size puts a lost member's share on whichever node plays its rank
// then, not on the node that wrote it, so the test reads that from the
// disks rather than guess it. It trusts the record's placement only to
// judge a failure's reason: what the mounts serve is checked byte by byte.

// placement is the newest record of dataset name on any node's disk (the
// job's or not), and for each of its members the node whose cache holds
// the member's share now (-1: its holder's cache is gone, wiped or
// replaced since).
func (ch *chaos) placement(name string) (*record.Record, []int) {
	ids := map[string]int{}
	var newest *record.Record
	for i, n := range ch.c.Nodes {
		if id := nodeID(n); id != "" {
			ids[id] = i
		}
		dirs, _ := filepath.Glob(filepath.Join(n.Cache, "*", "scrfs.*", name))
		for _, dir := range dirs {
			if rec, err := record.Load(dir); err == nil && (newest == nil || rec.Newer(newest)) {
				newest = rec
			}
		}
	}
	if newest == nil {
		return nil, nil
	}
	at := make([]int, len(newest.Members))
	for r, m := range newest.Members {
		at[r] = -1
		if i, ok := ids[m.HeldBy()]; ok {
			at[r] = i
		}
	}
	return newest, at
}

// nodeID is the identity of node n's cache, from its store's state ("" if
// it has none).
func nodeID(n *Node) string {
	files, _ := filepath.Glob(filepath.Join(n.Control, "*", "scrfs.*", "state.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var st struct {
			NodeID string `json:"node_id"`
		}
		if json.Unmarshal(b, &st) == nil && st.NodeID != "" {
			return st.NodeID
		}
	}
	return ""
}

// beyondTolerance says whether, by its newest record, some redundancy set
// of dataset name lost more members than its scheme tolerates: members
// whose holder's cache is gone, or whose holder is not in the job. It
// knows XOR and RS, the chaos test's schemes; for others it says false.
func (ch *chaos) beyondTolerance(name string) bool {
	rec, at := ch.placement(name)
	if rec == nil {
		return false
	}
	tolerates := map[string]int{"xor": 1, "rs": rec.Scheme.Parity}
	tol, known := tolerates[rec.Scheme.Kind]
	if !known {
		return false
	}
	out := map[int]int{} // set → members out
	for r, m := range rec.Members {
		if at[r] < 0 || !ch.inJob(at[r]) {
			out[m.Set]++
		}
	}
	for _, n := range out {
		if n > tol {
			return true
		}
	}
	return false
}
