// Package schemes applies redset's redundancy schemes — SINGLE, PARTNER, XOR
// and Reed-Solomon (RS) — to one dataset across the members of a redundancy
// set, and rebuilds the files of lost members from what the others hold: what
// each scheme puts in the segments of the redundancy files that package
// redfile writes and reads (docs/formats-redundancy.md).
//
// # Model
//
// A redundancy set has p members (ranks 0..p-1), one per node, each holding a
// dataset directory in its node-local cache. Every member calls Encode (after
// a checkpoint completed) or Rebuild (after a node loss) concurrently with the
// same Params; the members talk through the caller's Links, ordered reliable
// message streams between ranks. Nothing here knows about TCP, FUSE or the
// prefix directory.
//
// A member's logical file is the concatenation of its regular files in the
// order of its list (Member.Files, as completion made it with files.Scan;
// directories, symlinks and hard links carry metadata only).
// The schemes follow redset (LLNL), byte for byte in where each chunk goes:
//
//   - SINGLE: a header with the member's own file metadata, no data.
//   - PARTNER: member i stores full copies of the logical files of i-1..i-r.
//   - XOR: logical files are cut into p-1 chunks of ⌈max/(p-1)⌉ bytes, a zero
//     chunk is inserted at the member's own row, and member r stores the XOR
//     of row r across the set (a pipelined reduce-scatter around the ring).
//   - RS: p-k chunks of ⌈max/(p-k)⌉; in row j checksum i is stored by member
//     (j-i) mod p, which contributes zeros to that row; coefficients are
//     redset's systematic Vandermonde matrix, which is klauspost/reedsolomon's
//     default matrix.
//
// Each member's redundancy file records its own file metadata and that of
// the members it protects (with a CRC32C per file), so a rebuild restores
// names, sizes, modes, owners, times, directories, symlinks and hard links,
// and checks every restored file against its recorded CRC. Every byte read
// back from a redundancy file is checked against the per-block CRC32C in its
// trailer before use.
//
// # Concurrency and memory
//
// Data moves in pieces of Params.PieceSize bytes. Sending runs on one
// goroutine per peer link, so an algorithm never blocks on a slow receiver
// while it could be receiving; disk reads run ahead in a reader goroutine and
// a rebuilt member writes behind its receives. Memory stays a few pieces per
// active link, whatever the dataset size; a caller-owned Buffers
// (WithBuffers) recycles them across operations.
//
// Every link carries its messages in an order both ends derive from Params
// alone, and every algorithm receives in that order while its sends are
// queued; the tests run all members over unbuffered in-memory links to show
// that no schedule deadlocks.
//
// # Failures
//
// A member that fails sends an abort to every peer and returns; the others
// return a PeerError (wrapping ErrAborted and, when the peer said, its
// sentinel such as ErrCorrupt). A peer that was not listening to the failed
// member learns of it when that member's links close, so Links should fail
// the streams of a member whose call has returned. Operations end with a
// round of "done" messages: success on one member means success on all.
//
// The package keeps no global state: callers pass a *slog.Logger through
// WithLogger and read counters from Result.
package schemes
