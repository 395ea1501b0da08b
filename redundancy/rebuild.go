package redundancy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
)

// Restart from cache (SCR's scalable restart). When a daemon starts, its set
// takes stock: the coordinator (rank 0) asks every member for an inventory
// of its completed datasets, waiting at most MemberTimeout for each, plans
// (see plan) and has every member carry out the plan for each dataset:
// rebuild the lost members' files from the others, fail a dataset lost
// beyond what the scheme tolerates, mark one degraded while a lost member is
// away, or encode one that was never protected. A node that starts tells the
// coordinator, which runs such a round; rounds asked for while one runs are
// served by the next, so a whole job restarting at once costs one or two.

// rebuildMsg tells a member to take part in rebuilding a dataset.
type rebuildMsg struct {
	Dataset invDataset `json:"dataset"`
	Lost    []int      `json:"lost"`
	Attempt string     `json:"attempt"`
}

// outcomeMsg tells a member the plan's verdict for a dataset it holds.
type outcomeMsg struct {
	Dataset invDataset `json:"dataset"`
	Kind    actionKind `json:"kind"`
	Reason  string     `json:"reason"`
}

// Check implements jobnet.Checker.
func (m rebuildMsg) Check() error { return m.Dataset.check() }

// Check implements jobnet.Checker.
func (m outcomeMsg) Check() error { return m.Dataset.check() }

// Progress is a rebuild under way on this node, as `scrfs status` shows it.
type Progress struct {
	Route       cache.Route
	Done, Total int64
	Started     time.Time
}

// Restart runs when this daemon starts: it makes its set take stock and
// waits for that round, at most MemberTimeout for the coordinator to
// answer (a rebuild already under way carries on regardless: lookups of its
// dataset wait for it).
func (p *Protector) Restart(ctx context.Context) {
	coord := p.coordinator()
	if coord == p.self {
		select {
		case <-p.round():
		case <-ctx.Done():
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.MemberTimeout)
	defer cancel()
	if err := p.o.Mux.Call(ctx, coord, "member-started", struct{}{}, nil); err != nil {
		p.log.Warn("set coordinator did not answer; datasets stay as they are until it is back", "coordinator", coord, "err", err)
	}
}

// round asks for a stock-taking round and returns a channel closed when a
// round that started after the request has finished.
func (p *Protector) round() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == nil {
		p.next = make(chan struct{})
	}
	ch := p.next
	if !p.running {
		p.running = true
		if !p.g.Go(p.loop) {
			p.running = false
		}
	}
	return ch
}

func (p *Protector) loop(ctx context.Context) {
	for {
		p.mu.Lock()
		ch := p.next
		p.next = nil
		if ch == nil || ctx.Err() != nil {
			p.running = false
			p.mu.Unlock()
			if ch != nil {
				close(ch)
			}
			return
		}
		p.mu.Unlock()
		p.reconcile(ctx)
		close(ch)
	}
}

// reconcile is one coordinator round.
func (p *Protector) reconcile(ctx context.Context) {
	nodes := p.member.Set.Nodes
	invs := p.collect(ctx, nodes)
	acts := plan(p.o.Params, nodes, invs)
	var present []int
	for _, n := range nodes {
		if invs[n] != nil {
			present = append(present, n)
		}
	}
	p.log.Info("set took stock after a restart", "members", nodes, "answered", present, "actions", len(acts))
	for _, a := range acts {
		switch a.Kind {
		case actRebuild:
			if a.Dataset.Record != nil {
				a.Dataset.Record = rebuiltRecord(a.Dataset.Record, a.Lost, nodes, invs)
			}
			msg := rebuildMsg{Dataset: a.Dataset, Lost: a.Lost, Attempt: jobnet.NewToken()}
			for n, err := range p.o.Mux.CallAll(ctx, present, "rebuild", msg) {
				p.log.Warn("rebuild failed on a member", "dataset", a.Dataset.Name, "node", n, "err", err)
			}
		default:
			msg := outcomeMsg{Dataset: a.Dataset, Kind: a.Kind, Reason: a.Reason}
			for n, err := range p.o.Mux.CallAll(ctx, present, "outcome", msg) {
				p.log.Warn("could not deliver a restart outcome", "dataset", a.Dataset.Name, "node", n, "err", err)
			}
		}
	}
}

// collect asks every member for its inventory, each at most MemberTimeout;
// members that do not answer are left out.
func (p *Protector) collect(ctx context.Context, nodes []int) map[int]*inventoryMsg {
	ctx, cancel := context.WithTimeout(ctx, p.o.MemberTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[int]*inventoryMsg{}
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inv inventoryMsg
			if err := p.o.Mux.Call(ctx, n, "inventory", struct{}{}, &inv); err != nil {
				p.log.Warn("set member did not answer; treating it as lost for now", "member", n, "err", err)
				return
			}
			inv.Datasets = slices.DeleteFunc(inv.Datasets, func(d invDataset) bool {
				err := d.check()
				if err != nil {
					p.log.Warn("set member named a dataset that cannot be; ignored", "member", n, "err", err)
				}
				return err != nil
			})
			mu.Lock()
			out[n] = &inv
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (p *Protector) handleInventory(ctx context.Context, from int, _ struct{}) (any, error) {
	return p.inventory(), nil
}

// inventory verifies every completed dataset in this node's cache under
// its record's scheme and set. A dataset complete here but not yet
// recorded is left out: the job has not agreed it is complete.
func (p *Protector) inventory() inventoryMsg {
	out := inventoryMsg{Node: p.self, ID: p.o.Store.NodeID(), Datasets: []invDataset{}}
	for _, ds := range p.o.Store.Datasets() {
		info := ds.Info()
		if !info.State.Completed() {
			continue
		}
		item := invDataset{Name: info.Name, Kind: info.Kind, Root: info.Root, ID: info.ID, State: info.State}
		params, m, err := p.legacyOperation(info.Name, ds.Dir())
		rec, rerr := record.Load(ds.Dir())
		switch {
		case rerr == nil:
			item.Record = rec
			params, m, err = p.operation(rec, ds.Dir())
		case !record.IsMissing(rerr):
			err = rerr
		case info.State == cache.Complete:
			continue // not recorded yet: the completion protocol proves it first
		}
		if err == nil {
			_, err = schemes.Inspect(params, m)
		}
		if err != nil {
			item.Problem = err.Error()
		} else {
			item.Intact = true
		}
		out.Datasets = append(out.Datasets, item)
	}
	return out
}

func (p *Protector) handleMemberStarted(ctx context.Context, from int, _ struct{}) (any, error) {
	p.log.Info("set member (re)started; taking stock", "member", from)
	select {
	case <-p.round():
	case <-ctx.Done():
	}
	return struct{}{}, nil
}

// handleOutcome applies a verdict other than a rebuild.
func (p *Protector) handleOutcome(ctx context.Context, from int, m outcomeMsg) (any, error) {
	name := m.Dataset.Name
	if p.o.Store.Get(name) == nil {
		if m.Kind == actFail {
			return struct{}{}, p.o.Store.NoteFailed(m.Dataset.route(), "cannot be rebuilt: "+m.Reason)
		}
		return struct{}{}, nil
	}
	var err error
	switch m.Kind {
	case actFail:
		err = p.o.Store.Fail(name, "cannot be rebuilt: "+m.Reason)
	case actDegrade:
		err = p.o.Store.SetState(name, cache.Degraded, m.Reason)
		p.log.Warn("dataset degraded", "dataset", name, "reason", m.Reason)
	case actProtect:
		if m.Dataset.Record == nil {
			err = p.o.Store.SetState(name, cache.Degraded, "never protected, and it has no record to protect it by")
			break
		}
		p.Protect(m.Dataset.Record)
	case actClear:
		err = p.o.Store.SetState(name, cache.Protected, "")
		p.log.Info("dataset protected again: every member is back and verified", "dataset", name)
	}
	return struct{}{}, err
}

// handleRebuild takes part in rebuilding a dataset: a lost member restores
// its files into a staging directory and adopts them into the cache when
// every check passed; a survivor only reads.
func (p *Protector) handleRebuild(ctx context.Context, from int, msg rebuildMsg) (any, error) {
	rec := msg.Dataset.Record
	params, m, err := p.legacyOperation(msg.Dataset.Name, "")
	if rec != nil {
		params, m, err = p.operation(rec, "")
	}
	if err != nil {
		return nil, err
	}
	route := msg.Dataset.route()
	lost := slices.Contains(msg.Lost, m.Rank)
	log := p.log.With("dataset", m.Dataset, "lost", msg.Lost)
	if lost {
		if p.o.Store.Get(m.Dataset) != nil {
			if err := p.o.Store.Drop(m.Dataset, "local copy failed verification; rebuilding it"); err != nil {
				return nil, err
			}
		}
		m.Dir = p.o.Store.StagingDir(m.Dataset)
		if err := os.RemoveAll(m.Dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(m.Dir, 0o700); err != nil {
			return nil, err
		}
		done := p.o.Mount.Restoring(route, p.o.MemberTimeout)
		defer done()
	} else {
		ds := p.o.Store.Get(m.Dataset)
		if ds == nil {
			return nil, fmt.Errorf("survivor node %d no longer holds %s", p.self, m.Dataset)
		}
		defer ds.Pin()()
		m.Dir = ds.Dir()
	}
	prog := p.track(route)
	defer p.untrack(route.Name)
	log.Info("rebuilding dataset", "restoring_here", lost)
	links := p.links(m.Set.Nodes, "reb/"+m.Dataset+"/"+msg.Attempt)
	res, err := schemes.Rebuild(ctx, params, m, msg.Lost, links,
		p.options(schemes.WithProgress(func(done, total int64) { p.setProgress(prog, done, total) }))...)
	links.close()
	if err != nil {
		p.metrics.rebuildFailures.Inc()
		if lost {
			os.RemoveAll(m.Dir)
		}
		log.Error("rebuild failed", "err", err)
		return nil, err
	}
	p.metrics.rebuilt(res)
	if lost {
		if err := p.adoptRebuilt(route, m.Dir, rec); err != nil {
			return nil, err
		}
	} else {
		if rec != nil {
			if err := record.Save(m.Dir, rec); err != nil {
				log.Warn("keep the revised record", "err", err)
			}
		}
		if err := p.o.Store.SetState(m.Dataset, cache.Protected, ""); err != nil && !errors.As(err, new(*cache.TransitionError)) {
			log.Warn("record protected state", "err", err)
		}
	}
	seconds := res.Duration.Seconds()
	log.Info("dataset rebuilt", "bytes", res.DataBytes, "seconds", seconds,
		"rate_mib_s", float64(res.DataBytes)/(1<<20)/max(seconds, 1e-9), "restored_here", lost)
	return struct{}{}, nil
}

func (p *Protector) track(route cache.Route) *Progress {
	pr := &Progress{Route: route, Started: time.Now()}
	p.mu.Lock()
	p.progress[route.Name] = pr
	p.mu.Unlock()
	return pr
}

func (p *Protector) untrack(name string) {
	p.mu.Lock()
	delete(p.progress, name)
	p.mu.Unlock()
}

func (p *Protector) setProgress(pr *Progress, done, total int64) {
	p.mu.Lock()
	pr.Done, pr.Total = done, total
	p.mu.Unlock()
}

// Rebuilding reports the rebuilds under way on this node.
func (p *Protector) Rebuilding() []Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Progress, 0, len(p.progress))
	for _, pr := range p.progress {
		out = append(out, *pr)
	}
	return out
}

// adoptRebuilt takes a rebuilt member's files into the cache, in the job's
// completion order of its record, with the record beside them.
func (p *Protector) adoptRebuilt(route cache.Route, dir string, rec *record.Record) error {
	var seq uint64
	var completed time.Time
	if rec != nil {
		if err := record.Save(dir, rec); err != nil {
			return err
		}
		seq, completed = rec.Seq, rec.Completed
	}
	if _, err := p.o.Store.Adopt(route, cache.Protected, dir, seq, completed); err != nil {
		return err
	}
	p.o.Mount.Appeared(route)
	return nil
}

// legacyOperation is operation for a dataset completed before records
// existed: today's scheme and this node's set.
func (p *Protector) legacyOperation(name, dir string) (schemes.Params, schemes.Member, error) {
	m := p.member
	m.Dataset, m.Dir = name, dir
	return p.o.Params, m, nil
}

// rebuiltRecord revises a dataset's record for a rebuild of the lost ranks
// of a set (nodes[rank] is each rank's node now): a lost member's share is
// then held by the node that plays its rank, which has a new identity when
// it replaced a wiped node.
func rebuiltRecord(rec *record.Record, lost, nodes []int, invs map[int]*inventoryMsg) *record.Record {
	out := *rec
	out.Members = slices.Clone(rec.Members)
	out.Rev++
	for i := range out.Members {
		m := &out.Members[i]
		if !slices.Contains(lost, m.Rank) || m.Rank >= len(nodes) || invs[nodes[m.Rank]] == nil {
			continue
		}
		if set := rec.Set(m.Set); len(set) != len(nodes) || set[m.Rank].Node != nodes[m.Rank] {
			continue // another set's member
		}
		m.Holder = invs[nodes[m.Rank]].ID
		if m.Holder == m.ID {
			m.Holder = ""
		}
	}
	return &out
}
