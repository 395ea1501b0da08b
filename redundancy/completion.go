package redundancy

import (
	"context"
	"strconv"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/layout"
)

// Completion is a job-wide event: whichever node sees a rule fire, or runs
// `scrfs complete NAME`, tells every node; each node completes the dataset
// once its own files of it are closed. A node that wrote nothing for the
// dataset creates it empty, so it still takes part in redundancy.

// completeMsg asks a node to complete a dataset.
type completeMsg struct {
	Dataset string     `json:"dataset"`
	Kind    cache.Kind `json:"kind"`
	Root    string     `json:"root"`
	Reason  string     `json:"reason"`
	From    int        `json:"from"`
}

// Check implements jobnet.Checker.
func (m completeMsg) Check() error { return layout.CheckRoute(m.Dataset, string(m.Kind), m.Root) }

func (p *Protector) handleComplete(ctx context.Context, from int, m completeMsg) (any, error) {
	return struct{}{}, p.completeHere(m)
}

// completeHere completes a dataset on this node, creating it empty when
// this node wrote nothing for it.
func (p *Protector) completeHere(m completeMsg) error {
	if p.o.Store.Get(m.Dataset) == nil {
		r := cache.Route{Name: m.Dataset, Kind: m.Kind, Root: m.Root}
		if r.Kind == "" {
			r.Kind, r.Root = cache.KindDir, m.Dataset
		}
		if _, _, err := p.o.Store.Obtain(r); err != nil {
			return err
		}
		p.o.Mount.Appeared(r)
	}
	reason := m.Reason
	if m.From != p.self {
		reason = "node " + strconv.Itoa(m.From) + ": " + reason
	}
	return p.o.Store.RequestComplete(m.Dataset, reason)
}

// RuleFired tells the other nodes that a completion rule fired here for
// dataset r. It returns at once.
func (p *Protector) RuleFired(r cache.Route, reason string) {
	if p.o.Nodes == 1 {
		return
	}
	m := completeMsg{Dataset: r.Name, Kind: r.Kind, Root: r.Root, Reason: reason, From: p.self}
	p.tell("complete", m, p.others(), "could not tell a node to complete a dataset", r.Name)
}

// CompleteEverywhere completes a dataset on every node (scrfs complete).
func (p *Protector) CompleteEverywhere(name string) error {
	ds := p.o.Store.Get(name)
	if ds == nil {
		if p.o.Nodes == 1 {
			return p.o.Store.RequestComplete(name, "scrfs complete")
		}
		// Another node may have written it; they will all create it.
		m := completeMsg{Dataset: name, Reason: "scrfs complete", From: p.self}
		p.tell("complete", m, p.all(), "could not tell a node to complete a dataset", name)
		return nil
	}
	r := ds.Route()
	m := completeMsg{Dataset: name, Kind: r.Kind, Root: r.Root, Reason: "scrfs complete", From: p.self}
	if err := p.completeHere(m); err != nil {
		return err
	}
	if p.o.Nodes > 1 {
		p.tell("complete", m, p.others(), "could not tell a node to complete a dataset", name)
	}
	return nil
}
