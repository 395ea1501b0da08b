package pointers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet"
)

// Store is what the pointer files need of the node-local cache;
// *cache.Store implements it.
type Store interface {
	ChangePointers(set []cache.Pointer, remove []string, tag string) error
	PointerChanged(name string)
	RestorePointers()
	NewestDataset() string
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

	mu      sync.Mutex
	changed bool // the application changed one since this daemon started
}

// owner is the node that orders every change.
const owner = 0

// New returns this node's Pointers and registers its requests.
func New(o Options) *Pointers {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pointers{o: o, self: o.Mux.Self(), net: o.Mux.Protocol("pointers"), log: o.Logger}
	jobnet.Handle(p.net, "change", p.handleChange)
	jobnet.Handle(p.net, "apply", p.handleApply)
	return p
}

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
// leaves the cache.
func (p *Pointers) Restore() {
	p.mu.Lock()
	changed := p.changed
	p.mu.Unlock()
	if !changed {
		p.o.Store.RestorePointers()
	}
}
