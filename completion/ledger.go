package completion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/layout"
)

// ledgerName is node 0's ledger in its control directory.
const ledgerName = "ledger.json"

// Bounds of the ledger: far more datasets in flight, and nodes, than a job
// has; anything beyond was not written by scrfs.
const (
	maxBegun      = 4096
	maxNodes      = 1 << 20
	maxLedgerSize = 64 << 20
)

// ledger is what node 0 remembers, across its restarts, to judge shares:
// a clock that orders events, when it first heard of each identity, which
// runs began each dataset not yet recorded, and the next sequence number.
type ledger struct {
	Version int               `json:"version"`
	Clock   uint64            `json:"clock"`
	NextSeq uint64            `json:"next_seq"`
	Nodes   map[string]uint64 `json:"nodes"` // identity → when first heard of
	Begun   map[string]*begun `json:"begun"` // dataset → who began it
}

// begun records a dataset's start: when node 0 first heard of it, and
// every (identity, run) that began it.
type begun struct {
	At uint64      `json:"at"`
	By [][2]string `json:"by"`
	// Unreached are the nodes that could not be told it began before it
	// started without them, each with the daemon run node 0 knew for it
	// then ("" if none): only that run can vouch for the node's share.
	Unreached map[int]string `json:"unreached,omitempty"`
}

const ledgerVersion = 1

func newLedger() *ledger {
	return &ledger{Version: ledgerVersion, NextSeq: 1, Nodes: map[string]uint64{}, Begun: map[string]*begun{}}
}

// tick advances the clock and returns the new time.
func (l *ledger) tick() uint64 {
	l.Clock++
	return l.Clock
}

// heard records identity id, returning whether it is new.
func (l *ledger) heard(id string) bool {
	if _, ok := l.Nodes[id]; ok {
		return false
	}
	l.Nodes[id] = l.tick()
	return true
}

// begin records that run run of identity id began dataset name.
func (l *ledger) begin(name, id, run string) {
	l.heard(id)
	b := l.Begun[name]
	if b == nil {
		b = &begun{At: l.tick()}
		l.Begun[name] = b
		l.trim()
	}
	if !slices.Contains(b.By, [2]string{id, run}) {
		b.By = append(b.By, [2]string{id, run})
	}
}

// unreached notes that node n was not told dataset name began in time;
// run is the daemon run node 0 knew for it.
func (l *ledger) unreached(name string, n int, run string) {
	b := l.Begun[name]
	if b == nil {
		return
	}
	if b.Unreached == nil {
		b.Unreached = map[int]string{}
	}
	b.Unreached[n] = run
}

// trim forgets the oldest datasets beyond maxBegun: they were recorded or
// failed long ago, or never will be.
func (l *ledger) trim() {
	for len(l.Begun) > maxBegun {
		oldest, at := "", ^uint64(0)
		for name, b := range l.Begun {
			if b.At < at {
				oldest, at = name, b.At
			}
		}
		delete(l.Begun, oldest)
	}
}

// judge says why a share cannot stand, or "" if it does: the rules of the
// package comment.
func (l *ledger) judge(name string, node int, s *shareReply) string {
	b := l.Begun[name]
	if b == nil {
		return "node 0 has no record of when " + name + " began (its ledger was lost: node 0 was wiped or replaced)"
	}
	if run, ok := b.Unreached[node]; ok && s.Lost == "" && s.Run != run && s.Began != run {
		return "it could not be told the dataset began, and its daemon restarted before it answered (or node 0 knew no run of it), so it cannot vouch for what it wrote meanwhile"
	}
	runs := 0
	for _, by := range b.By {
		if by[0] == s.ID {
			runs++
		}
	}
	switch {
	case s.Lost != "":
		return s.Lost
	case s.Empty && runs > 0:
		return "it began the dataset but holds none of it"
	case s.Empty:
		if first, ok := l.Nodes[s.ID]; !ok || first > b.At {
			return "its cache is newer than the dataset (restarted wiped, or replaced), so it cannot vouch that it wrote nothing"
		}
	case !slices.Contains(b.By, [2]string{s.ID, s.Began}):
		return "its copy was not begun by a run node 0 knows of"
	case runs > 1:
		return "the dataset was begun by more than one run of this node, and the earlier one's files may be lost"
	}
	return ""
}

// done forgets a dataset once it is recorded or failed.
func (l *ledger) done(name string) { delete(l.Begun, name) }

// load reads the ledger from dir; a missing one is a new ledger. A damaged
// one is moved aside: datasets in flight then cannot be proven and fail,
// which loses no completed checkpoint.
func loadLedger(dir *jobdir.Dir) (*ledger, error) {
	b, err := dir.ReadFile(ledgerName, maxLedgerSize)
	if errors.Is(err, os.ErrNotExist) {
		return newLedger(), nil
	}
	if err != nil {
		return nil, err
	}
	l, err := decodeLedger(b)
	if err != nil {
		dir.Rename(ledgerName, ledgerName+".corrupt")
		return newLedger(), fmt.Errorf("%s: %w (moved aside; datasets being written cannot be proven complete)", dir.Join(ledgerName), err)
	}
	return l, nil
}

// decodeLedger parses a ledger like untrusted input.
func decodeLedger(b []byte) (*ledger, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	l := newLedger()
	if err := dec.Decode(l); err != nil {
		return nil, err
	}
	if l.Version != ledgerVersion {
		return nil, fmt.Errorf("version %d, this scrfs reads %d", l.Version, ledgerVersion)
	}
	if l.Nodes == nil {
		l.Nodes = map[string]uint64{}
	}
	if l.Begun == nil {
		l.Begun = map[string]*begun{}
	}
	if len(l.Nodes) > maxNodes || len(l.Begun) > maxBegun || l.NextSeq == 0 {
		return nil, fmt.Errorf("%d nodes, %d datasets, next sequence %d", len(l.Nodes), len(l.Begun), l.NextSeq)
	}
	for id, at := range l.Nodes {
		if id == "" || len(id) > 64 || at > l.Clock {
			return nil, fmt.Errorf("node %.20q heard of at %d, clock %d", id, at, l.Clock)
		}
	}
	for name, b := range l.Begun {
		if err := layout.CheckDatasetName(name); err != nil {
			return nil, err
		}
		if b == nil || b.At > l.Clock || len(b.By) > maxNodes || len(b.Unreached) > maxNodes {
			return nil, fmt.Errorf("dataset %s: bad start", name)
		}
		for n, run := range b.Unreached {
			if n < 0 || n >= maxNodes || len(run) > 64 {
				return nil, fmt.Errorf("dataset %s: bad unreached node %d", name, n)
			}
		}
	}
	return l, nil
}

func (l *ledger) save(dir *jobdir.Dir) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return dir.WriteFileAtomic(ledgerName, b, 0o600)
}
