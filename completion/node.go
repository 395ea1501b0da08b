package completion

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/record"
)

// Every node's side: asking node 0 before a dataset begins, joining at
// start, telling node 0 a completion rule fired, and answering node 0's
// requests for shares, records and failures.

// beginMsg asks node 0 to note that a run of a node began a dataset.
type beginMsg struct {
	Dataset string `json:"dataset"`
	Kind    string `json:"kind"`
	Root    string `json:"root"`
	ID      string `json:"id"`
	Run     string `json:"run"`
}

// Check implements jobnet.Checker.
func (m beginMsg) Check() error { return layout.CheckRoute(m.Dataset, m.Kind, m.Root) }

// beganReply is who a node is, when node 0 tells it a dataset began.
type beganReply struct {
	ID  string `json:"id"`
	Run string `json:"run"`
}

// handleBegan creates a dataset another node started, so every node shows
// the directory (an application's rank 0 creates it, the others write into
// it), and tells node 0 which run holds it here.
func (c *Completer) handleBegan(ctx context.Context, from int, m beginMsg) (any, error) {
	r := cache.Route{Name: m.Dataset, Kind: cache.Kind(m.Kind), Root: m.Root}
	if _, err := c.o.Store.Started(r); err != nil && !errors.Is(err, cache.ErrReadOnly) {
		return nil, err
	}
	return beganReply{ID: c.o.Store.NodeID(), Run: c.o.Incarnation}, nil
}

// Begin tells node 0 that this node is about to create dataset r for the
// application, and returns once node 0 noted it, within ConnectTimeout, or
// when ctx (the application's call) ends. A dataset the job already
// recorded cannot begin again (cache.ErrReadOnly).
func (c *Completer) Begin(ctx context.Context, r cache.Route) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
	defer cancel()
	m := beginMsg{Dataset: r.Name, Kind: string(r.Kind), Root: r.Root, ID: c.o.Store.NodeID(), Run: c.o.Incarnation}
	err := c.net.CallRetrying(ctx, coordinator, "begin", m, nil)
	if err != nil && !jobnet.IsRemote(err) {
		return fmt.Errorf("node 0 (which must know when every dataset begins) unreachable: %w", err)
	}
	return err
}

// renameMsg asks node 0 to rename a dataset being written, on every node.
type renameMsg struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"`
	Root string `json:"root"`
}

// Check implements jobnet.Checker.
func (m renameMsg) Check() error {
	if err := layout.CheckDatasetName(m.From); err != nil {
		return err
	}
	return layout.CheckRoute(m.To, m.Kind, m.Root)
}

// Rename asks node 0 to rename writing dataset from to route to on every
// other node, and returns once it did (the application renames the
// directory here, as ckpt.tmp → ckpt.100), bounded as Begin.
func (c *Completer) Rename(ctx context.Context, from string, to cache.Route) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
	defer cancel()
	err := c.net.CallRetrying(ctx, coordinator, "rename", renameMsg{From: from, To: to.Name, Kind: string(to.Kind), Root: to.Root}, nil)
	if err != nil && !jobnet.IsRemote(err) {
		return fmt.Errorf("node 0 (which renames a dataset on every node) unreachable: %w", err)
	}
	return err
}

// handleRenamed renames this node's copy of a dataset another node
// renamed.
func (c *Completer) handleRenamed(ctx context.Context, from int, m renameMsg) (any, error) {
	to := cache.Route{Name: m.To, Kind: cache.Kind(m.Kind), Root: m.Root}
	if err := c.o.Store.Renamed(m.From, to); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// joinMsg introduces a node's run to node 0.
type joinMsg struct {
	ID     string `json:"id"`
	Run    string `json:"run"`
	MaxSeq uint64 `json:"max_seq"`
	// Pending are the datasets complete here but not yet recorded (node 0
	// proves them now).
	Pending []pendingDataset `json:"pending,omitempty"`
	// Writing are the datasets being written here: a node 0 that restarted
	// learns of them, and fails those it can no longer vouch for.
	Writing []pendingDataset `json:"writing,omitempty"`
}

type pendingDataset struct {
	Dataset string `json:"dataset"`
	Kind    string `json:"kind"`
	Root    string `json:"root"`
}

// Check implements jobnet.Checker.
func (m joinMsg) Check() error {
	for _, p := range slices.Concat(m.Pending, m.Writing) {
		if err := layout.CheckRoute(p.Dataset, p.Kind, p.Root); err != nil {
			return err
		}
	}
	return nil
}

// Join introduces this daemon's run to node 0, with the newest record it
// holds (so sequence numbers go on after node 0 lost its ledger) and the
// datasets complete here but never recorded. The daemon calls it at start,
// before it reports ready.
//
// Node 0 then recalls every other node's join in the background (see
// recall): a node 0 that restarted, or was replaced, learns the datasets
// in flight and the job's newest sequence from the nodes that kept
// running.
func (c *Completer) Join(ctx context.Context) error {
	if c.self == coordinator {
		// Before its own join, which waits for the rounds of its pending
		// datasets, and they for the recall.
		c.g.Go(c.recall)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
	defer cancel()
	if err := c.net.CallRetrying(ctx, coordinator, "join", c.joining(), nil); err != nil {
		return fmt.Errorf("join node 0: %w", err)
	}
	return nil
}

// joining is what this node tells node 0 when it joins.
func (c *Completer) joining() joinMsg {
	m := joinMsg{ID: c.o.Store.NodeID(), Run: c.o.Incarnation}
	// A failed dataset holds its number too: a node 0 that lost its
	// ledger must not hand it out again.
	for _, info := range c.o.Store.Failures() {
		m.MaxSeq = max(m.MaxSeq, info.Seq)
	}
	for _, ds := range c.o.Store.Datasets() {
		info := ds.Info()
		m.MaxSeq = max(m.MaxSeq, info.Seq)
		p := pendingDataset{Dataset: info.Name, Kind: string(info.Kind), Root: info.Root}
		switch {
		case info.State.Completed() && info.Seq == 0:
			m.Pending = append(m.Pending, p)
		case info.State == cache.Writing:
			m.Writing = append(m.Writing, p)
		}
	}
	return m
}

// recallMsg asks a node for its join again (node 0, after its start).
type recallMsg struct{}

// handleRecall answers node 0's recall with what this node would tell it
// when joining.
func (c *Completer) handleRecall(ctx context.Context, from int, _ recallMsg) (any, error) {
	if from != coordinator {
		return nil, fmt.Errorf("node %d asked for a join; only node 0 does", from)
	}
	return c.joining(), nil
}

// completeMsg asks node 0 to complete a dataset job-wide.
type completeMsg struct {
	Dataset string `json:"dataset"`
	Kind    string `json:"kind,omitempty"`
	Root    string `json:"root,omitempty"`
	Reason  string `json:"reason"`
	From    int    `json:"from"`
	// fetched: every node adopted its share from the prefix (node 0's own
	// rounds only): the shares stand by the fetch, and the dataset keeps
	// its sequence number and time.
	fetched   bool
	seq       uint64
	completed time.Time
}

// Check implements jobnet.Checker.
func (m completeMsg) Check() error { return layout.CheckRoute(m.Dataset, m.Kind, m.Root) }

// RuleFired tells node 0 that a completion rule fired here for dataset r.
// It returns at once. Rules are told in the order they fired, so that
// node 0 numbers the datasets in that order (startRound).
func (c *Completer) RuleFired(r cache.Route, reason string) {
	m := completeMsg{Dataset: r.Name, Kind: string(r.Kind), Root: r.Root, Reason: reason, From: c.self}
	c.firedMu.Lock()
	defer c.firedMu.Unlock()
	c.fired = append(c.fired, m)
	if !c.telling {
		c.telling = c.g.Go(c.tellFired)
	}
}

// tellFired asks node 0 to complete each dataset whose rule fired here,
// one after the other, until none is left.
func (c *Completer) tellFired(ctx context.Context) {
	for {
		c.firedMu.Lock()
		if len(c.fired) == 0 {
			c.telling = false
			c.firedMu.Unlock()
			return
		}
		m := c.fired[0]
		c.fired = c.fired[1:]
		c.firedMu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
		if err := c.net.CallRetrying(cctx, coordinator, "complete", m, nil); err != nil {
			c.log.Error("could not ask node 0 to complete a dataset; it stays incomplete", "dataset", m.Dataset, "err", err)
		}
		cancel()
	}
}

// Complete completes dataset name job-wide (scrfs complete). It returns
// once node 0 started proving it; the dataset's state says how it ended.
func (c *Completer) Complete(ctx context.Context, name string) error {
	m := completeMsg{Dataset: name, Reason: "scrfs complete", From: c.self}
	if ds := c.o.Store.Get(name); ds != nil {
		r := ds.Route()
		m.Kind, m.Root = string(r.Kind), r.Root
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
	defer cancel()
	return c.net.CallRetrying(ctx, coordinator, "complete", m, nil)
}

// shareReq asks a node for its share of a dataset.
type shareReq struct {
	Dataset string `json:"dataset"`
	Kind    string `json:"kind"`
	Root    string `json:"root"`
	Reason  string `json:"reason"`
}

// Check implements jobnet.Checker.
func (m shareReq) Check() error { return layout.CheckRoute(m.Dataset, m.Kind, m.Root) }

// shareReply is a node's share, as node 0 judges it.
type shareReply struct {
	ID    string       `json:"id"`
	Run   string       `json:"run"`
	Began string       `json:"began,omitempty"` // the run that created this node's copy
	Empty bool         `json:"empty,omitempty"`
	Lost  string       `json:"lost,omitempty"` // why this node has no valid copy
	Files []files.Meta `json:"files,omitempty"`
	// Record is the job's record of the dataset, when this node holds it
	// recorded already: a round asked for again (a node that missed the
	// record rejoins, node 0 restarted) sends it on instead of judging.
	Record *record.Record `json:"record,omitempty"`
}

// handleShare completes the dataset here (once its files are closed) and
// reports what this node holds of it.
func (c *Completer) handleShare(ctx context.Context, from int, m shareReq) (any, error) {
	rep := shareReply{ID: c.o.Store.NodeID(), Run: c.o.Incarnation}
	for {
		changed := c.changes()
		ds := c.o.Store.Get(m.Dataset)
		if ds == nil {
			rep.Lost = c.failedHere(m.Dataset)
			rep.Empty = rep.Lost == ""
			return rep, nil
		}
		info := ds.Info()
		switch {
		case string(info.Kind) != m.Kind || info.Root != m.Root:
			rep.Lost = fmt.Sprintf("node %d holds a dataset %s anchored at %s %q", c.self, m.Dataset, info.Kind, info.Root)
			return rep, nil
		case info.State.Completed():
			// The one listing of this node's files: it becomes the
			// record's, which the encode and the flush read instead of
			// walking the tree again (a completed dataset does not change).
			// A file written here only in part lists the ranges written.
			list, err := ds.List()
			if err != nil {
				rep.Lost = fmt.Sprintf("node %d cannot list its files: %v", c.self, err)
				return rep, nil
			}
			rep.Began, rep.Files = info.Began, list
			if info.Seq > 0 {
				if rec, err := record.Load(ds.Dir()); err == nil {
					rep.Record = rec
				}
			}
			return rep, nil
		case info.Began != "" && info.Began != c.o.Incarnation:
			// Left being written by an earlier run of this daemon (which
			// was killed): what it wrote may be partial, and this run
			// cannot complete it (its restore fails it, but a round can
			// ask before that).
			rep.Lost = fmt.Sprintf("node %d lost its copy: it was being written when its daemon stopped", c.self)
			return rep, nil
		case info.Completing == "":
			if err := c.o.Store.RequestComplete(m.Dataset, m.Reason); err != nil && !errors.Is(err, cache.ErrReadOnly) {
				return nil, err
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("node %d: files of %s still open: %w", c.self, m.Dataset, ctx.Err())
		}
	}
}

// failedHere returns why dataset name failed on this node, if it did.
func (c *Completer) failedHere(name string) string {
	fs := c.o.Store.Failures()
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].Name == name {
			return "node " + strconv.Itoa(c.self) + " lost its copy: " + fs[i].Reason
		}
	}
	return ""
}

// recordMsg carries the job's record of a dataset.
type recordMsg struct {
	Record *record.Record `json:"record"`
}

// Check implements jobnet.Checker.
func (m recordMsg) Check() error {
	if m.Record == nil {
		return errors.New("no record")
	}
	return m.Record.Check()
}

// handleRecord keeps the record with this node's copy of the dataset (an
// empty copy if this node wrote nothing) and hands it on to be protected.
func (c *Completer) handleRecord(ctx context.Context, from int, m recordMsg) (any, error) {
	rec := m.Record
	me := rec.Member(c.o.Store.NodeID())
	if me == nil {
		return nil, fmt.Errorf("node %d lost its share after sharing it: its cache (%s) is not the one that shared it (wiped or replaced)", c.self, c.o.Store.NodeID())
	}
	route := cache.Route{Name: rec.Dataset, Kind: cache.Kind(rec.Kind), Root: rec.Root}
	ds := c.o.Store.Get(rec.Dataset)
	if ds == nil {
		if !me.Empty {
			return nil, fmt.Errorf("node %d lost its share of %s after sharing it", c.self, rec.Dataset)
		}
		var err error
		if ds, err = c.adoptEmpty(route, rec); err != nil {
			return nil, err
		}
	}
	if old, err := record.Load(ds.Dir()); err == nil && !rec.Newer(old) {
		return struct{}{}, nil // told twice
	}
	if err := record.Save(ds.Dir(), rec); err != nil {
		return nil, fmt.Errorf("node %d could not keep its record: %w", c.self, err)
	}
	// The store reports it recorded, and it is protected under rec.
	if err := c.o.Store.SetRecord(rec.Dataset, rec.Seq, rec.Completed); err != nil {
		return nil, fmt.Errorf("node %d could not keep its record: %w", c.self, err)
	}
	return struct{}{}, nil
}

// adoptEmpty gives this node an empty copy of a dataset it wrote nothing
// of, so it takes part in the redundancy and shows the dataset.
func (c *Completer) adoptEmpty(route cache.Route, rec *record.Record) (*cache.Dataset, error) {
	staging := c.o.Store.StagingDir(rec.Dataset)
	if err := os.RemoveAll(staging); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return nil, err
	}
	ds, err := c.o.Store.Adopt(route, cache.Complete, staging, 0, rec.Completed)
	if err != nil {
		os.RemoveAll(staging)
		return nil, err
	}
	return ds, nil
}

// failMsg tells every node that a dataset cannot be complete.
type failMsg struct {
	Dataset string `json:"dataset"`
	Kind    string `json:"kind"`
	Root    string `json:"root"`
	Reason  string `json:"reason"`
	// Seq, when set, fails the dataset recorded with that sequence too:
	// its record could not be kept on every node.
	Seq uint64 `json:"seq,omitempty"`
}

// Check implements jobnet.Checker.
func (m failMsg) Check() error { return layout.CheckRoute(m.Dataset, m.Kind, m.Root) }

func (c *Completer) handleFail(ctx context.Context, from int, m failMsg) (any, error) {
	if ds := c.o.Store.Get(m.Dataset); ds != nil {
		if seq := ds.Info().Seq; seq != 0 && seq != m.Seq {
			return nil, fmt.Errorf("node %d holds %s recorded; refusing to fail it", c.self, m.Dataset)
		}
		return struct{}{}, c.o.Store.Fail(m.Dataset, m.Reason)
	}
	if c.failedHere(m.Dataset) != "" {
		return struct{}{}, nil
	}
	return struct{}{}, c.o.Store.NoteFailed(cache.Route{Name: m.Dataset, Kind: cache.Kind(m.Kind), Root: m.Root}, m.Reason)
}

// Fetched tells node 0's completer that every node adopted its share of a
// dataset from the prefix (the fetch committed): it makes the dataset's
// record for this job, which protects it again under today's scheme. On
// other nodes it does nothing; they hear the record.
func (c *Completer) Fetched(info cache.Info) {
	if c.self != coordinator {
		return
	}
	c.startRound(completeMsg{Dataset: info.Name, Kind: string(info.Kind), Root: info.Root,
		Reason: "fetched from the prefix", From: c.self, fetched: true, seq: info.Seq, completed: info.Completed}, false)
}

// ReserveSeq makes every dataset recorded from now on get a sequence
// number of at least next: the prefix's index orders datasets by it across
// allocations. Node 0 only.
func (c *Completer) ReserveSeq(next uint64) {
	if c.self != coordinator {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.raiseSeqLocked(next) {
		if err := c.persistLocked(); err != nil {
			c.log.Warn("persist the next sequence number", "err", err)
		}
	}
}
