package pointers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/group"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
)

// Store is what the pointer files need of the node-local cache;
// *cache.Store implements it.
type Store interface {
	ChangePointers(set []cache.Pointer, remove []string, tag string) error
	PointerChanged(name string)
	NewestDataset() string
	ServedDatasets() []string
	DatasetPointers(name string) ([]cache.Pointer, bool, error)
	KeepPointers(name string, ps []cache.Pointer) error
	ShowPointers(ps []cache.Pointer)
}

// Options configure the Pointers of one node.
type Options struct {
	Mux   *jobnet.Mux
	Store Store
	// Nodes is the number of nodes in the job; this node is Mux.Self().
	Nodes int
	// ConnectTimeout bounds a change's wait for node 0 and node 0's for
	// every node.
	ConnectTimeout time.Duration
	Logger         *slog.Logger
}

// Pointers is one node's part of the job's pointer files. Create it with
// New before the transport delivers calls.
type Pointers struct {
	o    Options
	self int
	net  *jobnet.Protocol
	log  *slog.Logger
	g    *group.Group

	mu        sync.Mutex
	changed   bool // the application changed one since this daemon started
	restoring bool // a restore runs
	again     bool // … and another was asked for meanwhile
}

// owner is the node that orders every change.
const owner = 0

// New returns this node's Pointers and registers its requests.
func New(o Options) *Pointers {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pointers{o: o, self: o.Mux.Self(), net: o.Mux.Protocol("pointers"), log: o.Logger, g: group.New(context.Background())}
	jobnet.Handle(p.net, "change", p.handleChange)
	jobnet.Handle(p.net, "apply", p.handleApply)
	jobnet.Handle(p.net, "kept", p.handleKept)
	return p
}

// Close waits for a restore under way.
func (p *Pointers) Close() { p.g.Stop() }

// changeMsg is a change of the pointer files: set (written, made), then
// removed by name; a rename is both.
type changeMsg struct {
	Set    []cache.Pointer `json:"set,omitempty"`
	Remove []string        `json:"remove,omitempty"`
	// Tag is the dataset node 0 keeps them with ("" when there is none).
	Tag string `json:"tag,omitempty"`
}

// Check implements jobnet.Checker.
func (m changeMsg) Check() error {
	for i := range m.Set {
		if err := m.Set[i].Check(); err != nil {
			return err
		}
	}
	for _, name := range m.Remove {
		if err := (&cache.Pointer{Name: name, Type: cache.PointerFile}).Check(); err != nil {
			return err
		}
	}
	return nil
}

// Change makes set and the removal of remove the job's: it returns once
// node 0 told every node, this one included, or with the error that kept
// this node from showing it.
func (p *Pointers) Change(ctx context.Context, set []cache.Pointer, remove []string) error {
	ctx, cancel := context.WithTimeout(ctx, p.o.ConnectTimeout)
	defer cancel()
	p.mu.Lock()
	p.changed = true
	p.mu.Unlock()
	if err := p.net.CallRetrying(ctx, owner, "change", changeMsg{Set: set, Remove: remove}, nil); err != nil {
		return fmt.Errorf("pointer files: node 0 (which orders their changes): %w", err)
	}
	return nil
}

// handleChange tags a change with the newest dataset and tells every node
// (node 0).
func (p *Pointers) handleChange(ctx context.Context, from int, m changeMsg) (any, error) {
	if p.self != owner {
		return nil, fmt.Errorf("node %d does not order pointer files (node 0 does)", p.self)
	}
	m.Tag = p.o.Store.NewestDataset()
	ctx, cancel := context.WithTimeout(ctx, p.o.ConnectTimeout)
	defer cancel()
	all := make([]int, p.o.Nodes)
	for i := range all {
		all[i] = i
	}
	var fromErr error
	for n, r := range p.net.Fanout(ctx, all, "apply", m) {
		if r.Err == nil {
			continue
		}
		p.log.Warn("a node did not take a change of the pointer files", "node", n, "err", r.Err)
		if n == from {
			fromErr = r.Err
		}
	}
	if fromErr == nil {
		for _, ch := range m.Set {
			p.o.Store.PointerChanged(ch.Name) // the rule "pointer" (package cache)
		}
		for _, name := range m.Remove {
			p.o.Store.PointerChanged(name)
		}
	}
	return struct{}{}, fromErr
}

// handleApply shows a change node 0 ordered.
func (p *Pointers) handleApply(ctx context.Context, from int, m changeMsg) (any, error) {
	if from != owner {
		return nil, fmt.Errorf("node %d sent a change of the pointer files; only node 0 does", from)
	}
	p.mu.Lock()
	p.changed = true
	p.mu.Unlock()
	return struct{}{}, p.o.Store.ChangePointers(m.Set, m.Remove, m.Tag)
}

// Restore shows the pointer files of the newest checkpoint restored,
// unless the application changed one since this daemon started. The node
// calls it once restored, and again whenever a dataset is recorded or
// leaves the cache. It returns at once: where this node holds that
// checkpoint without its pointer files (it rebuilt or fetched it since),
// it asks the other nodes for them in the background.
func (p *Pointers) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.changed:
	case p.restoring:
		p.again = true
	default:
		p.restoring = true
		if !p.g.Go(p.restore) {
			p.restoring = false
		}
	}
}

// Restored shows the pointer files of the newest checkpoint restored, as
// Restore, and returns once they are shown: the node calls it at the end
// of its restore, before it reports ready.
func (p *Pointers) Restored(ctx context.Context) {
	p.mu.Lock()
	changed := p.changed
	p.mu.Unlock()
	if changed {
		return
	}
	ps := p.newest(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.changed && ctx.Err() == nil {
		p.o.Store.ShowPointers(ps)
	}
}

// restore runs Restore's work until no other was asked for meanwhile.
func (p *Pointers) restore(ctx context.Context) {
	for {
		ps := p.newest(ctx)
		p.mu.Lock()
		if !p.changed && ctx.Err() == nil {
			p.o.Store.ShowPointers(ps)
		}
		again := p.again
		p.again, p.restoring = false, again
		p.mu.Unlock()
		if !again {
			return
		}
	}
}

// newest returns the pointer files kept with the newest checkpoint served
// that kept any, here or on another node (which this node then keeps
// too); none when none did.
func (p *Pointers) newest(ctx context.Context) []cache.Pointer {
	for _, name := range p.o.Store.ServedDatasets() {
		ps, ok, err := p.o.Store.DatasetPointers(name)
		if err != nil {
			p.log.Warn("pointer files kept with a dataset unreadable", "dataset", name, "err", err)
		}
		if ok {
			return ps
		}
		if ps, ok = p.askKept(ctx, name); ok {
			if err := p.o.Store.KeepPointers(name, ps); err != nil {
				p.log.Warn("keep the pointer files another node kept with a dataset", "dataset", name, "err", err)
			}
			return ps
		}
	}
	return nil
}

// keptMsg asks a node for the pointer files kept with a dataset.
type keptMsg struct {
	Dataset string `json:"dataset"`
}

// Check implements jobnet.Checker.
func (m keptMsg) Check() error { return layout.CheckDatasetName(m.Dataset) }

type keptReply struct {
	Found    bool            `json:"found"`
	Pointers []cache.Pointer `json:"pointers,omitempty"`
}

// handleKept answers with the pointer files this node kept with a dataset.
func (p *Pointers) handleKept(ctx context.Context, from int, m keptMsg) (any, error) {
	ps, ok, err := p.o.Store.DatasetPointers(m.Dataset)
	if err != nil {
		return nil, err
	}
	return keptReply{Found: ok, Pointers: ps}, nil
}

// askKept asks every other node for the pointer files kept with dataset
// name, and returns the first found.
func (p *Pointers) askKept(ctx context.Context, name string) ([]cache.Pointer, bool) {
	if p.o.Nodes < 2 {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.ConnectTimeout)
	defer cancel()
	var others []int
	for n := range p.o.Nodes {
		if n != p.self {
			others = append(others, n)
		}
	}
	for n, r := range p.net.Fanout(ctx, others, "kept", keptMsg{Dataset: name}) {
		var rep keptReply
		if err := r.Decode(&rep); err != nil {
			p.log.Info("a node did not say which pointer files it kept with a dataset", "node", n, "dataset", name, "err", err)
			continue
		}
		if rep.Found && checkAll(rep.Pointers) == nil {
			return rep.Pointers, true
		}
	}
	return nil, false
}

// checkAll checks pointer files from another node.
func checkAll(ps []cache.Pointer) error {
	for i := range ps {
		if err := ps[i].Check(); err != nil {
			return err
		}
	}
	return nil
}
