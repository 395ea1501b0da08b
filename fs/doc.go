// Package fs is the FUSE face of scrfs: a go-fuse node tree that shows the
// node-local cache as one file system and routes every new entry into its
// dataset.
//
// # Node model
//
// Two kinds of nodes make up the tree.
//
//   - nsNode: a plain directory of the mount that is not a dataset (the mount
//     root, or a directory such as "ckpt" that holds flat datasets' files).
//     It lives in memory (its existence is persisted by the cache store) and
//     computes its entries from the store on every lookup and readdir, so the
//     tree never has to be rebuilt after a restart, an eviction or a rebuild.
//   - dsNode: a file, directory or symlink that belongs to a dataset. It is a
//     loopback onto the dataset's cache directory: its backing entry is its
//     path below the dataset's anchor (the dataset's root node for directory
//     datasets, the shared namespace directory for flat ones), named
//     relative to a descriptor of its parent directory, never by an absolute
//     path: paths inside a dataset may be longer than PATH_MAX, and
//     resolving beneath the dataset (openat2, no symlinks) keeps every
//     operation inside it. The descriptors of directories are cached
//     (dirCache), so this costs no extra system call.
//
// Modes are reported as stored (0000 included), every directory lists "."
// and "..", and names and attributes of complete datasets, which no longer
// change, may stay in the kernel's cache for an hour.
//
// Files are served by a handle over the cache file's descriptor. When the
// kernel supports FUSE passthrough (Linux ≥ 6.9) and the daemon may use it
// (CAP_SYS_ADMIN), reads and writes go straight to the cache file; the daemon
// still sees every open and release, which is all completion needs, and
// measures what a file grew by from its size at release. Without
// passthrough, write-only handles bypass the kernel's page cache (direct
// I/O): the writer's pages go to the daemon as they are, instead of being
// copied into a second cached copy of the checkpoint first.
//
// # Mounting
//
// The FS does not mount itself: package fs/mount does, and owns the
// mount's life (the mountpoint, stale and killed mounts, the guard,
// unmounting). The FS hands it its root and go-fuse options (Root,
// NodeOptions, with the kernel cache timeouts of Options) and is told the
// server once mounted (Mounted: only then may nodes notify the kernel) and
// whether the kernel takes passthrough (SetPassthrough).
//
// # Errors
//
// Every method returns syscall.Errno; Go errors from the cache store are
// mapped in exactly one place, toErrno. go-fuse types stay inside this
// package and fs/mount.
package fs
