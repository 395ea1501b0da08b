package record

import (
	"slices"
	"sync"
)

// Roster is who the job's nodes are now: each node's identity by its index
// in the running job. A record names members by identity, and a share
// rebuilt onto another node is held by that node's identity, so finding
// the node that serves a share takes the roster. The redundancy protocol
// learns it when the job takes stock; the namespace reads it. Its methods
// are safe for concurrent use; the zero value knows no node.
type Roster struct {
	mu  sync.Mutex
	ids []string
}

// Set replaces the identities, by node index ("" for a node that did not
// answer).
func (r *Roster) Set(ids []string) {
	r.mu.Lock()
	r.ids = slices.Clone(ids)
	r.mu.Unlock()
}

// Index returns the index of the node of identity id, or -1 when the
// roster does not know it.
func (r *Roster) Index(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id == "" {
		return -1
	}
	return slices.Index(r.ids, id)
}
