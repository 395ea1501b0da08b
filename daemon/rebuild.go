package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/schemes"
)

// Restart from cache (SCR's scalable restart). When a daemon starts, its set
// takes stock: the coordinator (rank 0) asks every member for an inventory
// of its completed datasets, waiting at most restart.member_timeout for each,
// plans (see plan) and has every member carry out the plan for each dataset:
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

// rebuilder is this node's part of the restart protocol.
type rebuilder struct {
	p *protector // shares params, member and buffers with encoding

	mu       sync.Mutex
	running  bool
	next     chan struct{} // closed when the next round has finished; nil if none asked for
	progress map[string]*rebuildProgress
}

// rebuildProgress is what `scrfs status` shows of a rebuild in progress.
type rebuildProgress struct {
	route       cache.Route
	done, total int64
	started     time.Time
}

func (d *Daemon) newRebuilder() *rebuilder {
	r := &rebuilder{p: d.protect, progress: map[string]*rebuildProgress{}}
	d.rpc.handle("inventory", r.handleInventory)
	d.rpc.handle("member-started", r.handleMemberStarted)
	d.rpc.handle("rebuild", r.handleRebuild)
	d.rpc.handle("outcome", r.handleOutcome)
	return r
}

func (r *rebuilder) d() *Daemon { return r.p.d }

// restart runs when this daemon starts: it makes its set take stock and
// waits for that round, at most restart.member_timeout for the coordinator
// to answer (a rebuild already under way carries on regardless: lookups of
// its dataset wait for it).
func (r *rebuilder) restart(ctx context.Context) {
	coord := r.p.coordinator()
	if coord == r.d().node {
		<-r.round()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.d().cfg.Restart.MemberTimeout.Duration)
	defer cancel()
	if err := r.d().rpc.call(ctx, coord, "member-started", struct{}{}, nil); err != nil {
		r.d().log.Warn("set coordinator did not answer; datasets stay as they are until it is back", "coordinator", coord, "err", err)
	}
}

// round asks for a reconcile round and returns a channel closed when a
// round that started after the request has finished.
func (r *rebuilder) round() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		r.next = make(chan struct{})
	}
	ch := r.next
	if !r.running {
		r.running = true
		go r.loop()
	}
	return ch
}

func (r *rebuilder) loop() {
	for {
		r.mu.Lock()
		ch := r.next
		r.next = nil
		if ch == nil {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		r.reconcile(r.d().ctx)
		close(ch)
	}
}

// reconcile is one coordinator round.
func (r *rebuilder) reconcile(ctx context.Context) {
	d := r.d()
	nodes := r.p.member.Set.Nodes
	invs := r.collect(ctx, nodes)
	acts := plan(r.p.params, nodes, invs)
	var present []int
	for _, n := range nodes {
		if invs[n] != nil {
			present = append(present, n)
		}
	}
	d.log.Info("set took stock after a restart", "members", nodes, "answered", present, "actions", len(acts))
	for _, a := range acts {
		switch a.Kind {
		case actRebuild:
			msg := rebuildMsg{Dataset: a.Dataset, Lost: a.Lost, Attempt: token()}
			for n, err := range d.rpc.callAll(ctx, present, "rebuild", msg) {
				d.log.Warn("rebuild failed on a member", "dataset", a.Dataset.Name, "node", n, "err", err)
			}
		default:
			msg := outcomeMsg{Dataset: a.Dataset, Kind: a.Kind, Reason: a.Reason}
			for n, err := range d.rpc.callAll(ctx, present, "outcome", msg) {
				d.log.Warn("could not deliver a restart outcome", "dataset", a.Dataset.Name, "node", n, "err", err)
			}
		}
	}
}

// collect asks every member for its inventory, each at most
// restart.member_timeout; members that do not answer are left out.
func (r *rebuilder) collect(ctx context.Context, nodes []int) map[int]*inventoryMsg {
	ctx, cancel := context.WithTimeout(ctx, r.d().cfg.Restart.MemberTimeout.Duration)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[int]*inventoryMsg{}
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inv inventoryMsg
			if err := r.d().rpc.call(ctx, n, "inventory", struct{}{}, &inv); err != nil {
				r.d().log.Warn("set member did not answer; treating it as lost for now", "member", n, "err", err)
				return
			}
			mu.Lock()
			out[n] = &inv
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (r *rebuilder) handleInventory(ctx context.Context, from int, req json.RawMessage) (any, error) {
	return r.inventory(), nil
}

// inventory verifies every completed dataset in this node's cache.
func (r *rebuilder) inventory() inventoryMsg {
	d := r.d()
	out := inventoryMsg{Node: d.node, Datasets: []invDataset{}}
	for _, ds := range d.store.Datasets() {
		info := ds.Info()
		if !info.State.Completed() {
			continue
		}
		m := r.p.member
		m.Dataset, m.Dir = info.Name, ds.Dir()
		item := invDataset{Name: info.Name, Kind: info.Kind, Root: info.Root, ID: info.ID, State: info.State}
		if _, err := schemes.Inspect(r.p.params, m); err != nil {
			item.Problem = err.Error()
		} else {
			item.Intact = true
		}
		out.Datasets = append(out.Datasets, item)
	}
	return out
}

func (r *rebuilder) handleMemberStarted(ctx context.Context, from int, req json.RawMessage) (any, error) {
	r.d().log.Info("set member (re)started; taking stock", "member", from)
	select {
	case <-r.round():
	case <-ctx.Done():
	}
	return struct{}{}, nil
}

// handleOutcome applies a verdict other than a rebuild.
func (r *rebuilder) handleOutcome(ctx context.Context, from int, req json.RawMessage) (any, error) {
	m, err := decode[outcomeMsg](req)
	if err != nil {
		return nil, err
	}
	d := r.d()
	name := m.Dataset.Name
	if d.store.Get(name) == nil {
		if m.Kind == actFail {
			return struct{}{}, d.store.NoteFailed(m.Dataset.route(), "cannot be rebuilt: "+m.Reason)
		}
		return struct{}{}, nil
	}
	switch m.Kind {
	case actFail:
		err = d.store.Fail(name, "cannot be rebuilt: "+m.Reason)
	case actDegrade:
		err = d.store.SetState(name, cache.Degraded, m.Reason)
		d.log.Warn("dataset degraded", "dataset", name, "reason", m.Reason)
	case actProtect:
		if ds := d.store.Get(name); ds != nil {
			go r.p.protect(ds.Info())
		}
	}
	return struct{}{}, err
}

// handleRebuild takes part in rebuilding a dataset: a lost member restores
// its files into a staging directory and adopts them into the cache when
// every check passed; a survivor only reads.
func (r *rebuilder) handleRebuild(ctx context.Context, from int, req json.RawMessage) (any, error) {
	msg, err := decode[rebuildMsg](req)
	if err != nil {
		return nil, err
	}
	d := r.d()
	m := r.p.member
	m.Dataset = msg.Dataset.Name
	route := msg.Dataset.route()
	lost := slices.Contains(msg.Lost, m.Rank)
	log := d.log.With("dataset", m.Dataset, "lost", msg.Lost)
	if lost {
		if d.store.Get(m.Dataset) != nil {
			if err := d.store.Drop(m.Dataset, "local copy failed verification; rebuilding it"); err != nil {
				return nil, err
			}
		}
		m.Dir = d.store.StagingDir(m.Dataset)
		if err := os.RemoveAll(m.Dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(m.Dir, 0o700); err != nil {
			return nil, err
		}
		done := d.fsys.Restoring(route, d.cfg.Restart.MemberTimeout.Duration)
		defer done()
	} else {
		ds := d.store.Get(m.Dataset)
		if ds == nil {
			return nil, fmt.Errorf("survivor node %d no longer holds %s", d.node, m.Dataset)
		}
		defer ds.Pin()()
		m.Dir = ds.Dir()
	}
	prog := r.track(route)
	defer r.untrack(route.Name)
	log.Info("rebuilding dataset", "restoring_here", lost)
	links := &streamLinks{d: d, nodes: m.Set.Nodes, prefix: "reb/" + m.Dataset + "/" + msg.Attempt}
	res, err := schemes.Rebuild(ctx, r.p.params, m, msg.Lost, links,
		r.p.options(schemes.WithProgress(func(done, total int64) { r.setProgress(prog, done, total) }))...)
	links.close()
	if err != nil {
		d.metrics.rebuildFailures.Inc()
		if lost {
			os.RemoveAll(m.Dir)
		}
		log.Error("rebuild failed", "err", err)
		return nil, err
	}
	d.metrics.rebuilt(res)
	if lost {
		if _, err := d.store.Adopt(route, cache.Protected, m.Dir); err != nil {
			return nil, err
		}
		d.fsys.Appeared(route)
	} else if err := d.store.SetState(m.Dataset, cache.Protected, ""); err != nil && !errors.As(err, new(*cache.TransitionError)) {
		log.Warn("record protected state", "err", err)
	}
	seconds := res.Duration.Seconds()
	log.Info("dataset rebuilt", "bytes", res.DataBytes, "seconds", seconds,
		"rate_mib_s", float64(res.DataBytes)/(1<<20)/max(seconds, 1e-9), "restored_here", lost)
	return struct{}{}, nil
}

func (r *rebuilder) track(route cache.Route) *rebuildProgress {
	p := &rebuildProgress{route: route, started: time.Now()}
	r.mu.Lock()
	r.progress[route.Name] = p
	r.mu.Unlock()
	return p
}

func (r *rebuilder) untrack(name string) {
	r.mu.Lock()
	delete(r.progress, name)
	r.mu.Unlock()
}

func (r *rebuilder) setProgress(p *rebuildProgress, done, total int64) {
	r.mu.Lock()
	p.done, p.total = done, total
	r.mu.Unlock()
}

// rebuilding reports the rebuilds under way on this node.
func (r *rebuilder) rebuilding() []rebuildProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]rebuildProgress, 0, len(r.progress))
	for _, p := range r.progress {
		out = append(out, *p)
	}
	return out
}
