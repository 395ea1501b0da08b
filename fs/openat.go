package fs

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// openFlags are the open(2) flags passed on to the cache file. openat2
// rejects the kernel-internal bits FUSE forwards (where open(2) ignores
// them), and O_DIRECT is dropped because the cache file system may not
// support it (tmpfs) and the daemon's own page cache is harmless.
const openFlags = unix.O_ACCMODE | unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY | unix.O_TRUNC |
	unix.O_APPEND | unix.O_NONBLOCK | unix.O_DSYNC | unix.O_SYNC | unix.O_NOATIME | unix.O_LARGEFILE

// openBeneath opens rel inside dir without following any symlink out of dir
// or at the final component. A node's path is computed from the tree, so
// between lookup and open the entry may have been swapped for a symlink (to
// /etc/shadow, say); resolving beneath the dataset directory with openat2
// makes such an open fail (ELOOP/EXDEV) instead of escaping the cache.
func openBeneath(dir, rel string, flags int, mode uint32) (int, error) {
	dirfd, err := syscall.Open(dir, unix.O_PATH|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer syscall.Close(dirfd)
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(dirfd, rel, &unix.OpenHow{
		Flags:   uint64(flags&openFlags | syscall.O_NOFOLLOW | syscall.O_CLOEXEC),
		Mode:    uint64(mode & 0o7777), // FUSE sends S_IFREG too; openat2 refuses it
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
}
