// Package prefix owns file-level I/O with the prefix directory on the
// parallel file system: it moves one node's share of a dataset between the
// node-local cache and the prefix, proves its integrity with CRC32C, and
// keeps the prefix's metadata — per-node manifest parts, the merged
// manifest and the job index — consistent under crashes.
//
// It knows nothing of FUSE or redundancy schemes: the daemon decides which
// dataset, when, and which nodes; this package does the I/O. The pieces:
//
//   - Flush and Fetch copy a dataset's files with Options.Streams
//     parallel streams (large files split into ranges), reused buffers,
//     the CRC computed on the buffer just read, holes of sparse files
//     skipped, and an optional shared bandwidth Limiter. Flush writes every
//     file under a temporary name, fsyncs it, and renames all of them into
//     place only once every one is written, so a failed or cancelled flush
//     leaves nothing under a final name.
//   - WritePart, MergeManifest, ReadPart and ReadManifest handle the
//     manifests: what each node flushed, with sizes and CRCs, and the merge
//     that detects two nodes claiming one path.
//   - UpdateIndex and ReadIndex handle the job index, updated under an
//     exclusive flock by atomic replacement; Index.Newest picks the dataset
//     a restart fetches, as SCR does.
//   - BeginFlush, CompleteFlush and RemoveDataset wrap these into the
//     protocol whose ordering guarantees that the index never calls a
//     dataset complete unless all of it is durable in the prefix.
//
// The prefix is a directory today. What only a directory does — the copy
// engine's temporary names, renames and fsyncs (dir_copy.go, dir_flush.go,
// dir_fetch.go), crash-safe metadata files (dir_atomic.go) and the flock'd
// index (dir_index.go) — sits in the dir_*.go files, apart from the formats
// and rules every kind of prefix store shares (entries, manifests, the
// index, the protocol's order).
//
// The formats and the crash-consistency argument are in
// docs/formats-prefix.md. Prefix paths and errors name the file and the
// operation ("flush ckpt.10: write /p/ckpt.10/rank_3.bin: no space left on
// device"). Nothing here keeps global state: loggers, metrics, limiters and
// buffer pools are passed in. Its metrics keep the names they had when the
// package was called flush (scrfs_flush_*): dashboards and alerts know them.
package prefix
