// Package redfile is the redundancy file format (docs/formats-redundancy.md):
// the preamble, the data region of segments, the JSON header recording the
// metadata of the member's files and of those it protects, the header CRC
// and the trailer of per-block CRC32Cs; the checks that make a file read
// from disk safe to use; and the primitives that write one (Create) and
// read one back block by block, every block checked (Open), which the
// schemes build their encodes and rebuilds on.
//
// A file is written under a temporary name, the data first (in segments,
// possibly from several goroutines, or spliced in from the network with the
// sender's CRC32C), then the header and trailer, the preamble last, and
// renamed into place once synced, so the final name never shows a partial
// file. Every reader treats a file as untrusted: lengths are checked before
// allocation, CRCs before use, and a file that does not check is an error
// wrapping ErrCorrupt that names it.
//
// What the format records about the scheme (its name, set size, PARTNER's
// replicas, RS's parity) has the rules of Scheme: which sets a scheme can
// run on and whose metadata each member's file records. It imports only
// layout and files: the erasure code is the schemes', not the format's.
package redfile
