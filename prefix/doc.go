// Package prefix owns the prefix: where datasets outlive the job, a
// directory on the parallel file system or S3-compatible object storage,
// which it treats as an untrusted store. It moves one node's share of a
// dataset between the node-local cache and the prefix, proves its
// integrity with CRC32C and its authenticity with MACs, and keeps the
// prefix's metadata — per-node manifest parts, the merged manifest and the
// job index — consistent under crashes.
//
// It knows nothing of FUSE or redundancy schemes: the daemon decides which
// dataset, when, and which nodes; this package does the I/O. Everything
// goes through one type, Prefix (Open a directory or an "s3://" URL), so
// the callers never know which store they use:
//
//   - Flush and Fetch copy a dataset's files with Options.Streams
//     parallel streams (large files split into ranges or parts), reused
//     buffers, the CRC computed on the buffer just read, and an optional
//     shared bandwidth Limiter.
//   - WritePart, ReadPart and ReadManifest handle the manifests: what each
//     node flushed, with sizes and CRCs, and the merge that detects two
//     nodes claiming one path. Each is signed (HMAC-SHA256 under the
//     user's prefix key, LoadKey) and refused when its MAC does not
//     verify.
//   - UpdateIndex and ReadIndex handle the job index, each entry signed,
//     updated so that concurrent updaters never lose a change;
//     Index.Newest picks the dataset a restart fetches, as SCR does, among
//     the entries the prefix trusts.
//   - BeginFlush, CompleteFlush and RemoveDataset wrap these into the
//     protocol whose ordering guarantees that the index never calls a
//     dataset complete unless all of it is durable in the prefix: the
//     index entry, written last, is the commit.
//
// Below Prefix, a store does what only its kind can (store.go): a
// directory (dir_*.go) held open, every path below it resolved one name
// at a time without following links, files created exclusively under
// temporary names, fsynced and renamed into place, the index under flock;
// or object storage (s3_*.go, aws-sdk-go-v2) with parallel multipart
// uploads and ranged GETs carrying CRC32C as the objects' checksums and
// the index replaced by conditional writes.
//
// The formats, the MACs, the threat model and the crash-consistency
// argument are in docs/formats-prefix.md. Errors name the file or object
// and the operation ("flush ckpt.10: write /p/ckpt.10/rank_3.bin: no
// space left on device"). Nothing here keeps global state: loggers,
// metrics, limiters and buffer pools are passed in. Its metrics keep the
// names they had when the package was called flush (scrfs_flush_*):
// dashboards and alerts know them.
package prefix
