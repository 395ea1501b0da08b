package daemon

import (
	"context"
	"encoding/json"

	"github.com/scrfs/scrfs/cache"
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

func (d *Daemon) registerCompletion() {
	d.rpc.handle("complete", func(ctx context.Context, from int, req json.RawMessage) (any, error) {
		m, err := decode[completeMsg](req)
		if err != nil {
			return nil, err
		}
		return struct{}{}, d.completeHere(m)
	})
}

// completeHere completes a dataset on this node, creating it empty when
// this node wrote nothing for it.
func (d *Daemon) completeHere(m completeMsg) error {
	if d.store.Get(m.Dataset) == nil {
		r := cache.Route{Name: m.Dataset, Kind: m.Kind, Root: m.Root}
		if r.Kind == "" {
			r.Kind, r.Root = cache.KindDir, m.Dataset
		}
		if _, _, err := d.store.Obtain(r); err != nil {
			return err
		}
		if d.fsys != nil {
			d.fsys.Appeared(r)
		}
	}
	reason := m.Reason
	if m.From != d.node {
		reason = "node " + itoa(m.From) + ": " + reason
	}
	return d.store.RequestComplete(m.Dataset, reason)
}

// onRuleFired tells the other nodes that a completion rule fired here.
func (d *Daemon) onRuleFired(r cache.Route, reason string) {
	if d.size == 1 {
		return
	}
	m := completeMsg{Dataset: r.Name, Kind: r.Kind, Root: r.Root, Reason: reason, From: d.node}
	go d.tellAll(m, d.others())
}

// completeEverywhere completes a dataset on every node (scrfs complete).
func (d *Daemon) completeEverywhere(name string) error {
	ds := d.store.Get(name)
	if ds == nil {
		if d.size == 1 {
			return d.store.RequestComplete(name, "scrfs complete")
		}
		// Another node may have written it; they will all create it.
		go d.tellAll(completeMsg{Dataset: name, Reason: "scrfs complete", From: d.node}, d.rpc.all())
		return nil
	}
	r := ds.Route()
	m := completeMsg{Dataset: name, Kind: r.Kind, Root: r.Root, Reason: "scrfs complete", From: d.node}
	if err := d.completeHere(m); err != nil {
		return err
	}
	if d.size > 1 {
		go d.tellAll(m, d.others())
	}
	return nil
}

func (d *Daemon) tellAll(m completeMsg, nodes []int) {
	ctx, cancel := context.WithTimeout(d.ctx, d.broadcastTimeout())
	defer cancel()
	for n, err := range d.rpc.callAll(ctx, nodes, "complete", m) {
		d.log.Warn("could not tell a node to complete a dataset", "dataset", m.Dataset, "to", n, "err", err)
	}
}
