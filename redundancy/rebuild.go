package redundancy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
)

// Restart from cache (SCR's scalable restart). When a daemon starts, node 0
// has the job take stock: it asks every node for an inventory of the
// recorded datasets it holds (verified: redundancy files and files), waits
// at most MemberTimeout for each, plans every set of every dataset under
// the dataset's record (see plan) — whatever the job's node list is now —
// and has the nodes carry it out: rebuild the lost members' shares from the
// others (onto a replacement, or onto a survivor when the job restarted on
// fewer nodes), fail a dataset lost beyond what its scheme tolerates,
// degrade one while a member is away, encode one that was never protected,
// clear degraded once every member is back. A node that starts tells node
// 0, which runs such a round; rounds asked for while one runs are served by
// the next, so a whole job restarting at once costs one or two.

// stockTaker is the node that takes stock for the job.
const stockTaker = 0

// rebuildMsg tells a node to take part in rebuilding one set of a dataset.
type rebuildMsg struct {
	Dataset invDataset `json:"dataset"` // its record revised: the lost members' new holders
	Set     int        `json:"set"`
	Nodes   []int      `json:"nodes"` // the node that plays each rank
	Lost    []int      `json:"lost"`
	Attempt string     `json:"attempt"`
}

// outcomeMsg tells a node the plan's verdict for one set of a dataset.
type outcomeMsg struct {
	Dataset invDataset `json:"dataset"`
	Kind    actionKind `json:"kind"`
	Reason  string     `json:"reason"`
	// Try names the stock-taking that asks for a protect (actProtect):
	// every member's protect of it gathers in one round.
	Try string `json:"try,omitempty"`
}

// membersMsg tells every node who the job's nodes are: their identities by
// index, as the stock-taking found them.
type membersMsg struct {
	IDs []string `json:"ids"`
}

// Check implements jobnet.Checker.
func (m rebuildMsg) Check() error {
	if err := m.Dataset.check(); err != nil {
		return err
	}
	set := m.Dataset.Record.Set(m.Set)
	if m.Set < 0 || len(set) == 0 || len(m.Nodes) != len(set) {
		return fmt.Errorf("rebuild of set %d with %d nodes", m.Set, len(m.Nodes))
	}
	for _, r := range m.Lost {
		if r < 0 || r >= len(set) {
			return fmt.Errorf("lost rank %d out of range", r)
		}
	}
	return nil
}

// Check implements jobnet.Checker.
func (m outcomeMsg) Check() error { return m.Dataset.check() }

// Progress is a rebuild under way on this node, as `scrfs status` shows it.
type Progress struct {
	Route       cache.Route
	Done, Total int64
	Started     time.Time
}

// Restart runs when this daemon starts: it makes the job take stock and
// waits for that round, at most MemberTimeout for node 0 to answer (a
// rebuild already under way carries on regardless: lookups of its dataset
// wait for it).
func (p *Protector) Restart(ctx context.Context) {
	if p.self == stockTaker {
		select {
		case <-p.round():
		case <-ctx.Done():
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.MemberTimeout)
	defer cancel()
	if err := p.net.Call(ctx, stockTaker, "member-started", struct{}{}, nil); err != nil {
		p.log.Warn("node 0 did not answer; datasets stay as they are until it takes stock", "err", err)
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

// TakingStock reports whether a stock-taking round runs here or was asked
// for (node 0).
func (p *Protector) TakingStock() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
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

// reconcile is one stock-taking round.
func (p *Protector) reconcile(ctx context.Context) {
	invs := p.collect(ctx)
	ids := map[int]string{}
	members := membersMsg{IDs: make([]string, p.o.Nodes)}
	for n, inv := range invs {
		ids[n], members.IDs[n] = inv.ID, inv.ID
	}
	p.tellWait(ctx, "members", members, answered(invs))
	acts := plan(p.o.Nodes, invs)
	names := memberNames(p.o.Nodes, invs)
	p.log.Info("the job took stock after a restart", "nodes", p.o.Nodes, "answered", answered(invs), "actions", len(acts))
	try := jobnet.NewToken()
	// What the rebuilds did, for the nodes shown a dataset last (actView):
	// its record as a rebuild revised it, why it stays degraded.
	latest := map[string]*record.Record{}
	degraded := map[string]string{}
	for _, a := range acts {
		name := a.Dataset.Name
		log := p.log.With("dataset", name, "set", a.Set)
		if p.arriving(a) {
			continue
		}
		if r := latest[name]; r != nil && r.Newer(a.Dataset.Record) {
			a.Dataset.Record = r
		}
		if a.Kind == actView && degraded[name] != "" {
			a.Reason = degraded[name]
		}
		if a.Kind != actRebuild {
			p.tellWait(ctx, "outcome", outcomeMsg{Dataset: a.Dataset, Kind: a.Kind, Reason: a.Reason, Try: try}, a.To)
			continue
		}
		a.Dataset.Record = rebuiltRecord(a.Dataset.Record, a.Set, a.Lost, a.Nodes, ids)
		msg := rebuildMsg{Dataset: a.Dataset, Set: a.Set, Nodes: a.Nodes, Lost: a.Lost, Attempt: jobnet.NewToken()}
		failed := p.net.CallAll(ctx, a.To, "rebuild", msg)
		var why error
		for n, err := range failed {
			log.Warn("rebuild failed on a node", "node", n, "err", err)
			why = err
		}
		if len(failed) > 0 {
			if p.arriving(a) {
				continue
			}
			// The set is short of the lost members until a rebuild works:
			// it says so, rather than protected, and the job takes stock
			// again (a member that restarted meanwhile asked for that
			// already; a passing fault did not).
			next := "it is tried again"
			if !p.retryRebuild(a.Dataset.Name) {
				next = fmt.Sprintf("it failed %d times: the job tries again when a node (re)starts", maxRetakes+1)
			}
			p.tellWait(ctx, "outcome", outcomeMsg{Dataset: a.Dataset, Kind: actDegrade,
				Reason: fmt.Sprintf("the rebuild of the shares of %s failed (%v); %s", names.list(a.Dataset.Record.Set(a.Set), a.Lost), why, next)}, a.To)
			degraded[name] = "a rebuild of it failed; " + next
			continue
		}
		latest[name] = a.Dataset.Record
		p.mu.Lock()
		delete(p.rebuildRetries, a.Dataset.Name)
		p.mu.Unlock()
		// Every node that holds the dataset keeps the record that says who
		// holds the rebuilt shares now.
		p.tellWait(ctx, "outcome", outcomeMsg{Dataset: a.Dataset, Kind: actRevise}, answered(invs))
		if doubled := hostedTwice(a.Nodes); doubled != "" {
			p.tellWait(ctx, "outcome", outcomeMsg{Dataset: a.Dataset, Kind: actDegrade, Reason: doubled}, distinct(a.Nodes))
			degraded[name] = doubled
		}
	}
}

// arriving says whether this node's restore is fetching dataset name from
// the prefix (Store.IsArriving; the stock-taker is node 0, which runs the
// restore): the fetched copy takes the place of what the caches hold of
// it, and is protected once recorded, so the stock-taking leaves it alone
// — checked before each action and after a failed rebuild, as a round
// planned before the restore decided may still be running.
func (p *Protector) arriving(a action) bool {
	if !p.o.Store.IsArriving(a.Dataset.Name) {
		return false
	}
	p.log.Info("the stock-taking leaves alone a dataset the restore fetches from the prefix", "dataset", a.Dataset.Name, "action", a.Kind)
	return true
}

// retryRebuild has the job take stock again after a failed rebuild of
// dataset name, a few times per dataset, and reports whether it will.
func (p *Protector) retryRebuild(name string) bool {
	p.mu.Lock()
	p.rebuildRetries[name]++
	again := p.rebuildRetries[name] <= maxRetakes
	p.mu.Unlock()
	if again {
		p.round()
	}
	return again
}

// tellWait sends msg as kind to nodes and logs the ones it could not reach.
func (p *Protector) tellWait(ctx context.Context, kind string, msg any, nodes []int) {
	for n, err := range p.net.CallAll(ctx, nodes, kind, msg) {
		p.log.Warn("could not tell a node how the job took stock", "kind", kind, "to", n, "err", err)
	}
}

// collect asks every node of the job for its inventory, each at most
// MemberTimeout; nodes that do not answer are left out.
func (p *Protector) collect(ctx context.Context) map[int]*inventoryMsg {
	ctx, cancel := context.WithTimeout(ctx, p.o.MemberTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[int]*inventoryMsg{}
	for n := range p.o.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inv inventoryMsg
			if err := p.net.Call(ctx, n, "inventory", struct{}{}, &inv); err != nil {
				p.log.Warn("a node did not answer; what it holds counts as away for now", "node", n, "err", err)
				return
			}
			inv.Datasets = slices.DeleteFunc(inv.Datasets, func(d invDataset) bool {
				err := d.check()
				if err != nil {
					p.log.Warn("a node named a dataset that cannot be; ignored", "node", n, "err", err)
				}
				return err != nil
			})
			inv.Pending = slices.DeleteFunc(inv.Pending, func(name string) bool { return layout.CheckDatasetName(name) != nil })
			inv.Node = n
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

// inventory verifies every recorded dataset in this node's cache, and
// every failed one whose files it keeps: every member's share it holds,
// under the record's scheme and set. A dataset complete here but not yet
// recorded is only named (Pending): the job may have agreed it while this
// node was down, and then its share is here, the record on its way.
func (p *Protector) inventory() inventoryMsg {
	out := inventoryMsg{Node: p.self, ID: p.o.Store.NodeID(), Datasets: []invDataset{}, CacheSize: p.o.Store.CacheSize()}
	for _, ds := range slices.Concat(p.o.Store.Datasets(), p.o.Store.Kept()) {
		info := ds.Info()
		if !info.State.Completed() && !info.Kept {
			continue
		}
		if info.Seq == 0 {
			out.Pending = append(out.Pending, info.Name)
			continue
		}
		rec, err := record.Load(ds.Dir())
		if err != nil {
			p.log.Warn("the record of a dataset is unreadable: it takes no part in the stock-taking", "dataset", info.Name, "err", err)
			continue
		}
		item := invDataset{Name: info.Name, Kind: info.Kind, Root: info.Root, State: info.State, Record: rec}
		for _, m := range rec.Held(p.o.Store.NodeID()) {
			share := heldShare{Member: m.ID}
			params, member, err := p.operationAs(rec, m, ds.ShareDir(m.ID))
			if err == nil {
				_, err = schemes.Inspect(params, member)
			}
			if err != nil {
				share.Problem = err.Error()
				share.Data = len(files.Missing(ds.ShareDir(m.ID), m.Files)) == 0
			} else {
				share.Intact = true
			}
			item.Shares = append(item.Shares, share)
		}
		out.Datasets = append(out.Datasets, item)
	}
	return out
}

func (p *Protector) handleMemberStarted(ctx context.Context, from int, _ struct{}) (any, error) {
	p.log.Info("a node (re)started; the job takes stock", "node", from)
	select {
	case <-p.round():
	case <-ctx.Done():
	}
	return struct{}{}, nil
}

// handleMembers hears who the job's nodes are.
func (p *Protector) handleMembers(ctx context.Context, from int, m membersMsg) (any, error) {
	p.o.Roster.Set(m.IDs)
	return struct{}{}, nil
}

// handleOutcome applies a verdict other than a rebuild.
func (p *Protector) handleOutcome(ctx context.Context, from int, m outcomeMsg) (any, error) {
	name := m.Dataset.Name
	switch m.Kind {
	case actFail:
		return struct{}{}, p.fail(m.Dataset, m.Reason)
	case actRevive:
		err := p.o.Store.Revive(name, cache.Degraded, "verified again: the members it lacked are back, and the job protects it again")
		if errors.Is(err, cache.ErrNotFound) {
			err = nil // not kept here any more: a dataset of its name replaced it
		}
		return struct{}{}, err
	case actView:
		return struct{}{}, p.view(m.Dataset, m.Reason)
	}
	ds := p.o.Store.Get(name)
	if ds == nil {
		return struct{}{}, nil
	}
	var err error
	switch m.Kind {
	case actDegrade:
		err = p.o.Store.SetState(name, cache.Degraded, m.Reason)
		p.log.Warn("dataset degraded", "dataset", name, "reason", m.Reason)
	case actProtect:
		p.protectTry(m.Dataset.Record, m.Try)
	case actClear:
		err = p.o.Store.SetState(name, cache.Protected, "")
		p.log.Info("dataset protected again: every member is back and verified", "dataset", name)
	case actRevise:
		if old, lerr := record.Load(ds.Dir()); lerr != nil || m.Dataset.Record.Newer(old) {
			err = p.revise(ds, m.Dataset.Record)
		}
		if err == nil {
			err = p.dropUnheld(ds, m.Dataset.Record)
		}
	}
	return struct{}{}, err
}

// fail fails a dataset the job cannot rebuild now. What this node holds
// of it is kept, not served (cache.Store.Keep): its members may come back;
// a node that holds nothing of it notes the failure.
func (p *Protector) fail(d invDataset, reason string) error {
	reason = "cannot be rebuilt: " + reason
	err := p.o.Store.Keep(d.Name, reason+"; the files that survive here are kept until its members return or the space is needed")
	if errors.Is(err, cache.ErrNotFound) {
		for _, f := range p.o.Store.Failures() {
			if f.Name == d.Name && f.Reason == reason {
				return nil // noted at an earlier stock-taking
			}
		}
		return p.o.Store.NoteFailed(d.route(), reason)
	}
	return err
}

// view shows a recorded dataset this node holds no share of (it completed
// while this node was away, or in a job without it): the node keeps its
// record — in an empty dataset directory, adopted, if it held nothing of
// it yet — and every node's mount shows it whole, this node reading its
// files from the members; and the state the job holds it in: degraded
// with reason, else protected (complete under SINGLE, which is never
// protected).
func (p *Protector) view(d invDataset, reason string) error {
	rec := d.Record
	st := cache.Protected
	switch {
	case reason != "":
		st = cache.Degraded
	case rec.Scheme.Kind == schemes.Single.String():
		st = cache.Complete
	}
	ds := p.o.Store.Get(d.Name)
	if ds != nil && len(rec.Held(p.o.Store.NodeID())) == 0 && (ds.Info().Files > 0 || st == cache.Complete && ds.State() != cache.Recorded) {
		// Files of an older record of it (the job recorded it anew since,
		// fetched while this node was away): its record names other
		// holders now, and this copy gives way to the job's.
		if err := p.o.Store.Drop(d.Name, "the job recorded it anew without this node's files; its record names the holders now"); err != nil {
			return err
		}
		ds = nil
	}
	if ds == nil {
		staging := p.o.Store.StagingDir(d.Name)
		if err := resetDir(staging); err != nil {
			return err
		}
		if err := record.Save(staging, rec); err != nil {
			os.RemoveAll(staging)
			return err
		}
		if err := syscall.Chmod(staging, rec.RootMode()); err != nil {
			os.RemoveAll(staging)
			return err
		}
		if _, err := p.o.Store.Adopt(d.route(), st, staging, rec.Seq, rec.Completed); err != nil {
			os.RemoveAll(staging)
			return err
		}
		p.log.Info("dataset shown here: it completed while this node was away or not in the job; its files are read from the nodes that hold them",
			"dataset", d.Name, "seq", rec.Seq)
	} else {
		if len(rec.Held(p.o.Store.NodeID())) > 0 {
			return nil // a share of it is here: the stock-taking's other actions see to it
		}
		if old, err := record.Load(ds.Dir()); err != nil || rec.Newer(old) {
			if err := p.revise(ds, rec); err != nil {
				return err
			}
		}
	}
	if st == cache.Complete {
		return nil
	}
	if err := p.o.Store.SetState(d.Name, st, reason); err != nil && !errors.As(err, new(*cache.TransitionError)) {
		return err
	}
	return nil
}

// handleRebuild takes part in rebuilding one set of a dataset, for every
// rank this node plays (its own, and one it now hosts for a node gone from
// the job).
func (p *Protector) handleRebuild(ctx context.Context, from int, msg rebuildMsg) (any, error) {
	// The plan names, by identity, who holds each rank's share once the
	// rebuild is done. A node that restarted with another cache since the
	// stock-taking (wiped again) is not the one the plan was made for: it
	// takes no part, or it would keep a share the record says another
	// identity holds; its start has the job take stock again.
	set := msg.Dataset.Record.Set(msg.Set)
	for r, n := range msg.Nodes {
		if id := set[r].HeldBy(); n == p.self && id != p.o.Store.NodeID() {
			return nil, fmt.Errorf("node %d: the rebuild of %s was planned for rank %d held by %s, and this node is %s now (it restarted since the stock-taking)",
				p.self, msg.Dataset.Name, r, id, p.o.Store.NodeID())
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(msg.Nodes))
	for r, n := range msg.Nodes {
		if n != p.self {
			continue
		}
		wg.Go(func() { errs[r] = p.rebuildRank(ctx, msg, r) })
	}
	wg.Wait()
	return struct{}{}, errors.Join(errs...)
}

// rebuildRank plays rank r of a rebuild: a survivor reads its share; a lost
// member's share is restored into a staging directory and taken into the
// cache — as this node's dataset when it holds nothing else of it (a
// replacement, or a damaged copy of its own), else as a hosted share —
// only once every check passed.
func (p *Protector) rebuildRank(ctx context.Context, msg rebuildMsg, r int) error {
	rec := msg.Dataset.Record
	m := rec.Set(msg.Set)[r]
	params, member, err := p.operationAs(rec, m, "")
	if err != nil {
		return err
	}
	route := msg.Dataset.route()
	lost := slices.Contains(msg.Lost, r)
	ds := p.o.Store.Get(route.Name)
	hosted := lost && ds != nil && m.ID != p.o.Store.NodeID() && ds.ShareDir(m.ID) == ds.Dir() && p.ownsAnother(rec, m)
	log := p.log.With("dataset", route.Name, "rank", r, "lost", msg.Lost, "hosted", hosted)
	switch {
	case lost && hosted:
		member.Dir = layout.HostedDir(ds.Dir(), m.ID) + ".tmp"
		if err := resetDir(member.Dir); err != nil {
			return err
		}
		defer ds.Pin()()
	case lost:
		if ds != nil {
			if err := p.o.Store.Drop(route.Name, "local copy failed verification; rebuilding it"); err != nil {
				return err
			}
		}
		member.Dir = p.o.Store.StagingDir(route.Name)
		if err := resetDir(member.Dir); err != nil {
			return err
		}
		done := p.o.Store.Restoring(route, p.o.MemberTimeout)
		defer done()
	default:
		if ds == nil {
			return fmt.Errorf("survivor node %d no longer holds %s", p.self, route.Name)
		}
		defer ds.Pin()()
		member.Dir = ds.ShareDir(m.ID)
	}
	run := p.track(route, msg.Attempt)
	defer p.untrack(run)
	log.Info("rebuilding dataset", "restoring_here", lost)
	links := p.links(msg.Nodes, r, "reb/"+route.Name+"/"+msg.Attempt)
	res, err := schemes.Rebuild(ctx, params, member, msg.Lost, links,
		p.options(schemes.WithProgress(func(done, total int64) { p.setProgress(run, done, total) }))...)
	links.close()
	if err != nil {
		p.metrics.rebuildFailures.Inc()
		log.Error("rebuild failed", "err", err)
		if lost {
			os.RemoveAll(member.Dir)
			return err
		}
		if !p.newest(run) {
			// A newer attempt began here meanwhile (the job took stock
			// again when other ranks of this one failed first): it, not
			// this one, says where the set stands.
			log.Info("the failed rebuild attempt was superseded; the newer one decides", "attempt", msg.Attempt)
			return err
		}
		// The set is still short of the lost members, whatever the job
		// decides next: a survivor must not look protected and at rest
		// while the other members' parts end and the job takes stock.
		reason := fmt.Sprintf("the rebuild of the shares of %s failed here (%v); the job takes stock again", namer{}.list(rec.Set(msg.Set), msg.Lost), err)
		if serr := p.o.Store.SetState(route.Name, cache.Degraded, reason); serr != nil && !errors.Is(serr, cache.ErrNotFound) {
			log.Warn("record degraded state", "err", serr)
		}
		return err
	}
	p.metrics.rebuilt(res)
	switch {
	case lost && hosted:
		if err := os.Rename(member.Dir, layout.HostedDir(ds.Dir(), m.ID)); err != nil {
			return err
		}
		err = p.revise(ds, rec)
	case lost:
		err = p.adoptRebuilt(route, member.Dir, rec)
	default:
		if err := p.revise(ds, rec); err != nil {
			log.Warn("keep the revised record", "err", err)
		}
		if err := p.o.Store.SetState(route.Name, cache.Protected, ""); err != nil && !errors.As(err, new(*cache.TransitionError)) {
			log.Warn("record protected state", "err", err)
		}
	}
	if err != nil {
		return err
	}
	seconds := res.Duration.Seconds()
	log.Info("dataset rebuilt", "bytes", res.DataBytes, "seconds", seconds,
		"rate_mib_s", float64(res.DataBytes)/(1<<20)/max(seconds, 1e-9), "restored_here", lost)
	return nil
}

// ownsAnother reports whether this node holds a member's share of rec
// other than m: then a share of m restored here is hosted beside it.
func (p *Protector) ownsAnother(rec *record.Record, m *record.Member) bool {
	for i := range rec.Members {
		o := &rec.Members[i]
		if o.ID != m.ID && (o.ID == p.o.Store.NodeID() || o.HeldBy() == p.o.Store.NodeID()) {
			return true
		}
	}
	return false
}

// revise keeps a revised record of ds (who holds which share now) and
// tells the store.
func (p *Protector) revise(ds *cache.Dataset, rec *record.Record) error {
	if err := record.Save(ds.Dir(), rec); err != nil {
		return err
	}
	p.o.Store.Revised(rec.Dataset)
	return nil
}

// dropUnheld removes the shares this node hosts of ds that rec no longer
// says it holds (their own node came back with them).
func (p *Protector) dropUnheld(ds *cache.Dataset, rec *record.Record) error {
	hosted := layout.HostedRoot(ds.Dir())
	entries, err := os.ReadDir(hosted)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		if m := rec.Member(e.Name()); m != nil && m.HeldBy() == p.o.Store.NodeID() {
			continue
		}
		p.log.Info("a share this node hosted is held by its own node again; dropped", "dataset", ds.Info().Name, "member", e.Name())
		if err := os.RemoveAll(filepath.Join(hosted, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// resetDir makes dir an empty directory.
func resetDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o700)
}

// rebuildRun is the ranks of one rebuild attempt of a dataset that run on
// this node (a host of another member's share plays two), and how far
// they are.
type rebuildRun struct {
	Progress
	attempt string
	ranks   int
}

// track notes that a rank of rebuild attempt of route runs here. A newer
// attempt takes the place of an older one still ending here.
func (p *Protector) track(route cache.Route, attempt string) *rebuildRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.rebuilds[route.Name]; r != nil && r.attempt == attempt {
		r.ranks++
		return r
	}
	r := &rebuildRun{Progress: Progress{Route: route, Started: time.Now()}, attempt: attempt, ranks: 1}
	p.rebuilds[route.Name] = r
	return r
}

// untrack notes that a rank of r ended; the last one ends r, unless a
// newer attempt took its place (whose entry stays).
func (p *Protector) untrack(r *rebuildRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rebuilds[r.Route.Name] != r {
		return
	}
	if r.ranks--; r.ranks == 0 {
		delete(p.rebuilds, r.Route.Name)
	}
}

// newest reports whether r is still the newest rebuild attempt of its
// dataset here: the failure of a superseded one no longer says where the
// set stands.
func (p *Protector) newest(r *rebuildRun) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rebuilds[r.Route.Name] == r
}

func (p *Protector) setProgress(r *rebuildRun, done, total int64) {
	p.mu.Lock()
	r.Done, r.Total = done, total
	p.mu.Unlock()
}

// Rebuilding reports the rebuilds under way on this node.
func (p *Protector) Rebuilding() []Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Progress, 0, len(p.rebuilds))
	for _, r := range p.rebuilds {
		out = append(out, r.Progress)
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
	_, err := p.o.Store.Adopt(route, cache.Protected, dir, seq, completed)
	return err
}
