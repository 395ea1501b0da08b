package prefix

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/scrfs/scrfs/layout"
)

// The multi-node flush protocol, in the order that keeps the index honest
// (docs/formats-prefix.md has the argument):
//
//	coordinator: BeginFlush       index says "flushing"; old manifests go
//	every node:  Flush, WritePart files durable, then the node's part
//	coordinator: CompleteFlush    once all nodes reported: merge, then "complete"
//
// A crash anywhere leaves the dataset "flushing" (or absent), never
// "complete" with something missing; the retry starts again at BeginFlush.
// The index is the commit: a dataset exists in the prefix only once its
// entry says complete, which the last step writes.

// BeginFlush records in the index that dataset e.Name (with e.ID, e.Nodes,
// e.Kind and e.Root; other fields are ignored) is being flushed, demoting it
// if an earlier flush had completed, and only then removes the manifests of
// that earlier flush and what unfinished ones left under temporary names.
// Call it on the coordinating node before any node
// starts Flush for the dataset.
func (p *Prefix) BeginFlush(ctx context.Context, e IndexEntry, lg *slog.Logger) error {
	e = IndexEntry{Name: e.Name, ID: e.ID, State: StateFlushing, Nodes: e.Nodes, Kind: e.Kind, Root: e.Root,
		Started: time.Now().UTC()}
	if err := layout.CheckDatasetName(e.Name); err != nil {
		return fmt.Errorf("begin flush: %w", err)
	}
	err := p.UpdateIndex(ctx, lg, func(ix *Index) error { return ix.Put(e) })
	if err != nil {
		return fmt.Errorf("begin flush of %s: %w", e.Name, err)
	}
	if err := p.s.removeMeta(ctx, e.Name); err != nil {
		return fmt.Errorf("begin flush of %s: %w", e.Name, err)
	}
	if err := p.s.sweep(ctx, e.Name); err != nil {
		return fmt.Errorf("begin flush of %s: %w", e.Name, err)
	}
	return nil
}

// CompleteFlush merges the parts of nodes 0..nodes-1 of dataset into its
// manifest, with record (the dataset's record as the job agreed it; nil:
// none) and pointers (the pointer files kept with it; nil: none) beside
// it, and then marks the dataset complete in the index,
// with its totals, the manifest's digest and the flush time. Call it on
// the coordinating node once every node's Flush and WritePart returned. A
// dataset missing from the index is added with the next free ID. The
// caller owns the returned manifest.
func (p *Prefix) CompleteFlush(ctx context.Context, dataset string, nodes int, record, pointers []byte, lg *slog.Logger) (*Manifest, error) {
	m, err := p.mergeManifest(ctx, dataset, nodes, record, pointers)
	if err != nil {
		return nil, fmt.Errorf("complete flush: %w", err)
	}
	err = p.UpdateIndex(ctx, lg, func(ix *Index) error {
		e, ok := ix.Lookup(dataset)
		if !ok {
			e = IndexEntry{Name: dataset, ID: ix.MaxID() + 1}
		}
		e.State, e.Nodes, e.Files, e.Bytes, e.Manifest = StateComplete, nodes, m.Files, m.Bytes, m.SHA256
		e.Flushed = time.Now().UTC()
		e.FailedFetches = nil // new bytes: old verdicts no longer apply
		return ix.Put(e)
	})
	if err != nil {
		return nil, fmt.Errorf("complete flush of %s: %w", dataset, err)
	}
	return m, nil
}

// RemoveDataset deletes dataset from the prefix: first its index entry (so
// the index never names a dataset that is partly gone), then its manifests,
// then its files. Use it to clean up a failed flush before a retry, or to
// prune old datasets. Removing a dataset that is not there is not an error.
func (p *Prefix) RemoveDataset(ctx context.Context, dataset string, lg *slog.Logger) error {
	if err := layout.CheckDatasetName(dataset); err != nil {
		return fmt.Errorf("remove dataset: %w", err)
	}
	ix, err := p.ReadIndex(ctx)
	if err != nil {
		return fmt.Errorf("remove dataset %s: %w", dataset, err)
	}
	if _, ok := ix.Lookup(dataset); ok {
		err := p.UpdateIndex(ctx, lg, func(ix *Index) error {
			if !ix.Remove(dataset) {
				return errNoWrite
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("remove dataset %s: %w", dataset, err)
		}
	}
	if err := p.s.removeMeta(ctx, dataset); err != nil {
		return fmt.Errorf("remove dataset %s: %w", dataset, err)
	}
	if err := p.s.removeData(ctx, dataset); err != nil {
		return fmt.Errorf("remove dataset %s: %w", dataset, err)
	}
	return nil
}
