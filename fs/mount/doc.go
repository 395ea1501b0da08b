// Package mount owns the life of a scrfs mount: mounting a go-fuse node
// tree (a Tree; scrfs's is *fs.FS) on a directory, by mount(2) as root or
// through fusermount3 otherwise, and everything that can go wrong around
// it.
//
//   - The mountpoint is prepared: created if missing, a stale mount left
//     by a daemon that is gone detached, one a live daemon serves refused,
//     and one of the same cache whose daemon does not answer aborted.
//   - Passthrough is probed once the kernel has answered INIT, and the
//     tree told whether it may use it.
//   - A daemon killed while the kernel holds one of its threads cannot
//     exit, and the application's call on its mount hangs. The mount's
//     guard, a process of its own started with the mount (Options.Guard,
//     Guard), aborts that FUSE connection at once through fusectl; if the
//     guard is gone too, the job's next daemon does (RecoverKilled).
//   - Unmount detaches a busy mountpoint lazily rather than fail.
//
// The node tree knows nothing of this: it hands over its root and go-fuse
// options and is told the server and the passthrough decision. With fs,
// this is the only package that imports go-fuse.
package mount
