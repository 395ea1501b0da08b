package prefix

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
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

// BeginFlush records in the index that dataset e.Name (with e.ID, e.Nodes,
// e.Kind and e.Root; other fields are ignored) is being flushed, demoting it
// if an earlier flush had completed, and only then removes the manifests of
// that earlier flush. Call it on the coordinating node before any node
// starts Flush for the dataset.
func BeginFlush(ctx context.Context, prefix string, e IndexEntry, lg *slog.Logger) error {
	e = IndexEntry{Name: e.Name, ID: e.ID, State: StateFlushing, Nodes: e.Nodes, Kind: e.Kind, Root: e.Root,
		Started: time.Now().UTC()}
	if err := layout.CheckDatasetName(e.Name); err != nil {
		return fmt.Errorf("begin flush: %w", err)
	}
	err := UpdateIndex(ctx, prefix, lg, func(ix *Index) error { return ix.Put(e) })
	if err != nil {
		return fmt.Errorf("begin flush of %s: %w", e.Name, err)
	}
	if err := removeTree(ManifestDir(prefix, e.Name)); err != nil {
		return fmt.Errorf("begin flush of %s: %w", e.Name, err)
	}
	return nil
}

// CompleteFlush merges the parts of nodes 0..nodes-1 into dataset's manifest
// and then marks the dataset complete in the index, with its totals and the
// flush time. Call it on the coordinating node once every node's Flush and
// WritePart returned. A dataset missing from the index is added with the
// next free ID. The caller owns the returned manifest.
func CompleteFlush(ctx context.Context, prefix, dataset string, nodes int, lg *slog.Logger) (*Manifest, error) {
	m, err := MergeManifest(prefix, dataset, nodes)
	if err != nil {
		return nil, fmt.Errorf("complete flush: %w", err)
	}
	err = UpdateIndex(ctx, prefix, lg, func(ix *Index) error {
		e, ok := ix.Lookup(dataset)
		if !ok {
			e = IndexEntry{Name: dataset, ID: ix.MaxID() + 1}
		}
		e.State, e.Nodes, e.Files, e.Bytes = StateComplete, nodes, m.Files, m.Bytes
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
// (Refined from the brief: ctx and lg as for UpdateIndex.)
func RemoveDataset(ctx context.Context, prefix, dataset string, lg *slog.Logger) error {
	if err := layout.CheckDatasetName(dataset); err != nil {
		return fmt.Errorf("remove dataset: %w", err)
	}
	if _, err := os.Stat(layout.PrefixMetaDir(prefix)); err == nil {
		err := UpdateIndex(ctx, prefix, lg, func(ix *Index) error {
			if !ix.Remove(dataset) {
				return errNoWrite
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("remove dataset %s: %w", dataset, err)
		}
	}
	if err := removeTree(ManifestDir(prefix, dataset)); err != nil {
		return fmt.Errorf("remove dataset %s: %w", dataset, err)
	}
	if err := removeTree(layout.PrefixDatasetDir(prefix, dataset)); err != nil {
		return fmt.Errorf("remove dataset %s: %w", dataset, err)
	}
	return nil
}

// removeTree removes dir and everything below it, then syncs its parent so
// the removal survives a crash. A missing dir is fine.
func removeTree(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// RemoveAll stops at a directory it cannot write; make the tree
	// writable first (Flush keeps owner rwx, but a user may have chmodded).
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700) // best effort; RemoveAll reports what remains
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return pathErr("remove", dir, err)
	}
	return fsyncDir(filepath.Dir(dir))
}
