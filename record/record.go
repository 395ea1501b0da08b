// Package record defines a dataset's record: what the job agreed a
// completed checkpoint is. A coordinator makes it when every node that was
// part of the job while the dataset was written has proven its share, and
// sends it to every node, which keeps it beside the dataset's redundancy
// files (File in the dataset's metadata directory); flushes copy it to the
// prefix directory. Every later decision reads it, never a node's local view
// or today's configuration: eviction (by Seq), which scheme and sets
// protect it, who its members are (by identity, whatever their index in a
// later job), what each wrote, and where each share lives now.
//
// The package is data only: encoding, the checks that make a record read
// from disk or from a peer safe to act on, small queries, and the View of
// a dataset as one node's mount shows it (the union of the members' trees,
// built from the record alone, so fs answers lookups and listings without
// importing the protocols).
package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/redfile"
)

// Version is the record format this scrfs writes and reads.
const Version = 1

// File is the name of a record in a dataset's metadata directory and in
// the prefix's manifest directory of the dataset.
const File = layout.RecordFile

// MaxBytes bounds a record read from disk or received: ample for hundreds
// of thousands of files, far below what could hurt a daemon. The daemons'
// peer messages must carry one this large (a node's share, the record).
const MaxBytes = 64 << 20

// Record is a completed dataset as the job agreed it.
type Record struct {
	Version int    `json:"version"`
	Dataset string `json:"dataset"`
	// Kind and Root say where the dataset sits in the mount (cache.Route).
	Kind string `json:"kind"`
	Root string `json:"root"`
	// Seq orders completions job-wide (larger is newer), across restarts
	// and allocations; Completed is when the coordinator began proving it
	// (so both follow the order completion rules fired in).
	Seq       uint64    `json:"seq"`
	Completed time.Time `json:"completed"`
	// Rev counts changes after completion (a share rebuilt onto another
	// node); the highest revision wins.
	Rev int `json:"rev"`
	// Fetched is when a job last fetched the dataset from the prefix and
	// protected it anew (zero if never). Its shares are then other files
	// than those of any earlier encoding, whose holders may return with a
	// higher Rev (rebuilds made while the fetching job ran without them):
	// the later fetch wins whatever the Rev.
	Fetched time.Time `json:"fetched,omitzero"`
	Scheme  Scheme    `json:"scheme"`
	// Members are the nodes of the job when the dataset completed, by
	// node index then.
	Members []Member `json:"members"`
}

// Scheme is the redundancy the dataset is protected under.
type Scheme struct {
	Kind      string `json:"kind"` // as layout.KindSingle, KindPartner, KindXOR, KindRS
	Replicas  int    `json:"replicas,omitempty"`
	Parity    int    `json:"parity,omitempty"`
	PieceSize int    `json:"piece_size,omitempty"`
	// Sets is the number of redundancy sets; members say which is theirs.
	Sets int `json:"sets"`
}

// check reports whether the scheme can protect a set of members: as the
// redundancy files it is encoded into record a scheme, with a piece size
// that is one of their block sizes (0: the default).
func (s Scheme) check(members int) error {
	if s.PieceSize != 0 && (s.PieceSize < redfile.MinBlockSize || s.PieceSize > redfile.MaxBlockSize) {
		return fmt.Errorf("piece size %d not in [%d, %d]", s.PieceSize, redfile.MinBlockSize, redfile.MaxBlockSize)
	}
	return redfile.Scheme{Kind: s.Kind, Size: members, Replicas: s.Replicas, Parity: s.Parity}.Check()
}

// Member is one node's part of the dataset.
type Member struct {
	// Node is the member's index in the job that completed the dataset.
	Node int `json:"node"`
	// ID is the member's identity: its cache's, kept across restarts, new
	// when the cache is wiped.
	ID string `json:"id"`
	// Set and Rank place it in its redundancy set.
	Set  int `json:"set"`
	Rank int `json:"rank"`
	// Holder is the identity of the node that holds the share now, when
	// not the member itself (it was rebuilt onto a survivor).
	Holder string `json:"holder,omitempty"`
	// Empty says the member wrote nothing (and could prove it).
	Empty bool `json:"empty,omitempty"`
	// Files is what it wrote, as files.Scan lists a dataset.
	Files []files.Meta `json:"files,omitempty"`
}

// HeldBy returns the identity of the node that holds the member's share.
func (m *Member) HeldBy() string {
	if m.Holder != "" {
		return m.Holder
	}
	return m.ID
}

// Set returns the members of set id in rank order.
func (r *Record) Set(id int) []*Member {
	var out []*Member
	for i := range r.Members {
		if m := &r.Members[i]; m.Set == id {
			for len(out) <= m.Rank {
				out = append(out, nil)
			}
			out[m.Rank] = m
		}
	}
	return out
}

// Member returns the member of identity id, or nil.
func (r *Record) Member(id string) *Member {
	for i := range r.Members {
		if r.Members[i].ID == id {
			return &r.Members[i]
		}
	}
	return nil
}

// Held returns the members whose shares the node of identity id holds:
// its own, and any rebuilt onto it.
func (r *Record) Held(id string) []*Member {
	var out []*Member
	for i := range r.Members {
		if m := &r.Members[i]; m.HeldBy() == id {
			out = append(out, m)
		}
	}
	return out
}

// Newer reports whether r supersedes o: a later completion, the same one
// fetched and protected anew later, or the same encoding revised.
func (r *Record) Newer(o *Record) bool {
	if r.Seq != o.Seq {
		return r.Seq > o.Seq
	}
	if c := r.Fetched.Compare(o.Fetched); c != 0 {
		return c > 0
	}
	return r.Rev > o.Rev
}

// Marshal encodes r.
func (r *Record) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ErrBadRecord is wrapped by every error about a record that cannot be
// acted on.
var ErrBadRecord = errors.New("bad dataset record")

// Decode parses a record read from disk or received from a peer and checks
// it (see Check).
func Decode(b []byte) (*Record, error) {
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadRecord, len(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the record", ErrBadRecord)
	}
	if err := r.Check(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Check reports whether r can be acted on: a known version, a dataset name
// and route that are safe to build paths from, a valid scheme, and members
// that form the sets the scheme needs, each set's ranks 0..p-1 once, with
// file lists whose paths stay inside the dataset.
func (r *Record) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadRecord, r.Dataset, fmt.Sprintf(format, args...))
	}
	if r.Version != Version {
		return fmt.Errorf("%w: version %d, this scrfs reads %d", ErrBadRecord, r.Version, Version)
	}
	if err := layout.CheckRoute(r.Dataset, r.Kind, r.Root); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if r.Seq == 0 || r.Rev < 0 {
		return bad("sequence %d, revision %d", r.Seq, r.Rev)
	}
	if len(r.Members) == 0 || r.Scheme.Sets < 1 || r.Scheme.Sets > len(r.Members) {
		return bad("%d members in %d sets", len(r.Members), r.Scheme.Sets)
	}
	ids := map[string]bool{}
	nodes := map[int]bool{}
	for i := range r.Members {
		m := &r.Members[i]
		if m.ID == "" || len(m.ID) > 64 || ids[m.ID] || m.Node < 0 || nodes[m.Node] || len(m.Holder) > 64 {
			return bad("member %d: identity %.20q, node %d: missing, too long or repeated", i, m.ID, m.Node)
		}
		ids[m.ID], nodes[m.Node] = true, true
		if m.Set < 0 || m.Set >= r.Scheme.Sets {
			return bad("member %s in set %d of %d", m.ID, m.Set, r.Scheme.Sets)
		}
		if m.Empty && len(m.Files) > 0 {
			return bad("member %s is empty and lists files", m.ID)
		}
		if err := files.Check(m.Files); err != nil {
			return bad("member %s: %v", m.ID, err)
		}
	}
	for s := range r.Scheme.Sets {
		set := r.Set(s)
		for rank, m := range set {
			if m == nil {
				return bad("set %d has no rank %d", s, rank)
			}
		}
		if err := r.Scheme.check(len(set)); err != nil {
			return bad("set %d: %v", s, err)
		}
	}
	return nil
}
