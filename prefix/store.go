package prefix

import (
	"context"
	"log/slog"
)

// store is one kind of prefix, behind the Prefix every caller uses: a
// directory (dirStore, the dir_*.go files) or S3-compatible object storage
// (s3Store, the s3_*.go files). The formats, the MACs, the order of the
// flush protocol and the index's rules are the Prefix's, above it; a store
// moves bytes and keeps its own promises of atomicity, which the comments
// of each method state.
//
// Names: a dataset's files are "<dataset>/<entry path>", the metadata
// "<name>" below the prefix's .scrfs ("index.json",
// "manifests/<dataset>/manifest.json"), both '/'-separated and checked by
// the callers (layout.CheckDatasetName, checkEntries).
type store interface {
	// String names the prefix in messages: its directory or its URL.
	String() string
	// locate names a dataset's file or directory (rel "ckpt.1/a.bin",
	// "ckpt.1") in messages and logs.
	locate(rel string) string
	// check reaches the prefix, so that a wrong location, endpoint or
	// credentials show when the daemon starts rather than at its first
	// flush. It creates nothing.
	check(ctx context.Context) error
	// put copies node's entries of dataset (sorted by path, checked) from
	// srcDir, the dataset's cache directory, filling in each file's CRC32C
	// when o.CRC. When it returns nil every file is durable in the store;
	// when it fails, it has removed what it wrote where it can.
	put(ctx context.Context, dataset, srcDir string, node int, es []Entry, o Options, prog *progress) error
	// linkOK checks that the store holds symlink e of dataset as the
	// manifest says (a store that keeps no links has nothing to check).
	linkOK(ctx context.Context, dataset string, e *Entry) error
	// get copies the regular files of es (the entries a node fetches,
	// sorted, checked) of dataset into dstDir, whose directories exist,
	// checking each against its entry (size always, CRC32C with o.CRC) and
	// reporting a mismatch as a *CorruptError.
	get(ctx context.Context, dataset, dstDir string, es []Entry, o Options, prog *progress) error
	// readAt fills buf with the bytes at off of regular file e of
	// dataset (checked for its type and size where the store can), and
	// names the file it read.
	readAt(ctx context.Context, dataset string, e *Entry, off int64, buf []byte) (string, error)
	// readMeta returns metadata file name; a missing one is an error
	// wrapping fs.ErrNotExist. Files larger than maxMetadataSize are
	// refused.
	readMeta(ctx context.Context, name string) ([]byte, error)
	// writeMeta replaces name with b atomically and durably: a reader
	// sees the old content or the new, never a mix.
	writeMeta(ctx context.Context, name string, b []byte) error
	// removeMeta removes dataset's metadata (manifests/<dataset>).
	removeMeta(ctx context.Context, dataset string) error
	// removeData removes dataset's files.
	removeData(ctx context.Context, dataset string) error
	// sweep removes what flushes of dataset that never finished left
	// under temporary names (a node killed while it wrote): a retry by
	// another node, or by the same host under another index, writes under
	// other temporary names and would not replace them.
	sweep(ctx context.Context, dataset string) error
	// updateIndex replaces the index with f(current) (nil when there is
	// none yet) so that concurrent updaters, on any node, never lose each
	// other's change: under a lock, or by a conditional write that is
	// retried on a conflict (f may then run more than once). An error of
	// f ends the update and is returned as it is.
	updateIndex(ctx context.Context, lg *slog.Logger, f func(cur []byte) ([]byte, error)) error
	// close releases what the store holds open.
	close() error
}

// Metadata names below .scrfs.
const indexName = "index.json"

func manifestsOf(dataset string) string { return "manifests/" + dataset }
func partName(dataset string, node int) string {
	return manifestsOf(dataset) + "/node." + itoa(node) + ".json"
}
func manifestName(dataset string) string { return manifestsOf(dataset) + "/manifest.json" }
func recordName(dataset string) string   { return manifestsOf(dataset) + "/record.json" }
func pointersName(dataset string) string { return manifestsOf(dataset) + "/pointers.json" }
