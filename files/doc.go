// Package files defines a dataset's file list: what one member of a
// dataset wrote, entry by entry (path, type, size, mode, owner, times,
// symlink target, CRC32C), as completion lists it (Scan), the job's record
// keeps it, the redundancy files' headers carry it, and encode, flush,
// rebuild and every node's view of the dataset read it.
//
// It sits below the erasure code and the prefix: it imports only layout
// (for the metadata directory a list never enters) and the standard
// library, so the packages that need a dataset's files — fs, completion,
// transfer, the prefix — do not link the schemes.
//
// A list comes from untrusted sources as well (a peer, a header, a record
// read from disk): Check says whether one is safe to act on, CheckPath
// whether one path is.
package files
