package prefix

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/scrfs/scrfs/files"
)

// The tests of the directory store call the prefix by paths, as scrfs
// called it before it had other stores: each helper opens the prefix
// directory with the tests' key for one call.

var testKey = []byte("scrfs-tests-0123456789abcdef0123")

// dirPrefix opens the directory prefix at dir with the tests' key.
func dirPrefix(dir string) *Prefix {
	p, err := Open(context.Background(), Config{Location: dir, Key: testKey})
	if err != nil {
		panic(err)
	}
	return p
}

// dirFlush flushes into dst, a dataset's directory in a prefix.
func dirFlush(ctx context.Context, src, dst string, node int, list []files.Meta, o Options) ([]Entry, error) {
	p := dirPrefix(filepath.Dir(dst))
	defer p.Close()
	return p.Flush(ctx, filepath.Base(dst), src, node, list, o)
}

// dirFetch fetches from src, a dataset's directory in a prefix.
func dirFetch(ctx context.Context, src, dst string, entries []Entry, o Options) error {
	p := dirPrefix(filepath.Dir(src))
	defer p.Close()
	return p.Fetch(ctx, filepath.Base(src), dst, entries, o)
}

func dirReadIndex(prefix string) (*Index, error) {
	p := dirPrefix(prefix)
	defer p.Close()
	return p.ReadIndex(context.Background())
}

func dirUpdateIndex(ctx context.Context, prefix string, lg *slog.Logger, f func(*Index) error) error {
	p := dirPrefix(prefix)
	defer p.Close()
	return p.UpdateIndex(ctx, lg, f)
}

// dirUpdateIndexFlock is dirUpdateIndex on a file system whose flock is
// flock.
func dirUpdateIndexFlock(ctx context.Context, prefix string, lg *slog.Logger, f func(*Index) error, flock func(int, int) error) error {
	p := dirPrefix(prefix)
	defer p.Close()
	p.s.(*dirStore).flock = flock
	return p.UpdateIndex(ctx, lg, f)
}

func dirWritePart(prefix, dataset string, node int, entries []Entry) error {
	p := dirPrefix(prefix)
	defer p.Close()
	return p.WritePart(context.Background(), dataset, node, entries)
}

func dirReadPart(prefix, dataset string, node int) ([]Entry, error) {
	p := dirPrefix(prefix)
	defer p.Close()
	return p.ReadPart(context.Background(), dataset, node)
}

func dirMergeManifest(prefix, dataset string, nodes int) (*Manifest, error) {
	p := dirPrefix(prefix)
	defer p.Close()
	return p.mergeManifest(context.Background(), dataset, nodes, nil, nil)
}

func dirReadManifest(prefix, dataset string) (*Manifest, error) {
	p := dirPrefix(prefix)
	defer p.Close()
	return p.ReadManifest(context.Background(), dataset, "")
}

func dirBeginFlush(ctx context.Context, prefix string, e IndexEntry, lg *slog.Logger) error {
	p := dirPrefix(prefix)
	defer p.Close()
	return p.BeginFlush(ctx, e, lg)
}

func dirCompleteFlush(ctx context.Context, prefix, dataset string, nodes int, lg *slog.Logger) (*Manifest, error) {
	p := dirPrefix(prefix)
	defer p.Close()
	return p.CompleteFlush(ctx, dataset, nodes, nil, nil, lg)
}

func dirRemoveDataset(ctx context.Context, prefix, dataset string, lg *slog.Logger) error {
	p := dirPrefix(prefix)
	defer p.Close()
	return p.RemoveDataset(ctx, dataset, lg)
}

// The paths of the metadata files in a directory prefix.
func indexPath(prefix string) string { return filepath.Join(prefix, ".scrfs", "index.json") }
func manifestDir(prefix, dataset string) string {
	return filepath.Join(prefix, ".scrfs", "manifests", dataset)
}
func partPath(prefix, dataset string, node int) string {
	return filepath.Join(manifestDir(prefix, dataset), "node."+itoa(node)+".json")
}
func manifestPath(prefix, dataset string) string {
	return filepath.Join(manifestDir(prefix, dataset), "manifest.json")
}
