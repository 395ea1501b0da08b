package fs

import (
	"sync"
	"syscall"

	"github.com/scrfs/scrfs/cache"

	"golang.org/x/sys/unix"
)

// openFlags are the open(2) flags passed on to the cache file. openat2
// rejects the kernel-internal bits FUSE forwards (where open(2) ignores
// them), and O_DIRECT is dropped because the cache file system may not
// support it (tmpfs) and the daemon's own page cache is harmless.
const openFlags = unix.O_ACCMODE | unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY | unix.O_TRUNC |
	unix.O_APPEND | unix.O_NONBLOCK | unix.O_DSYNC | unix.O_SYNC | unix.O_NOATIME | unix.O_LARGEFILE

// dirFDs holds an O_PATH descriptor of each dataset's cache directory, the
// anchor of every open inside it: opening the anchor for each file would
// cost two more system calls per create. A descriptor follows its directory
// through renames; it is closed when the dataset leaves the cache (Forget).
type dirFDs struct {
	mu  sync.Mutex
	fds map[*cache.Dataset]int
}

// anchor returns dataset d's directory descriptor, opening it on first use.
func (f *FS) anchor(d *cache.Dataset) (int, error) {
	f.dirs.mu.Lock()
	defer f.dirs.mu.Unlock()
	if fd, ok := f.dirs.fds[d]; ok {
		return fd, nil
	}
	fd, err := syscall.Open(d.Dir(), unix.O_PATH|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if f.dirs.fds == nil {
		f.dirs.fds = map[*cache.Dataset]int{}
	}
	f.dirs.fds[d] = fd
	return fd, nil
}

// dropAnchors closes the descriptors of datasets called name.
func (f *FS) dropAnchors(name string) {
	f.dirs.mu.Lock()
	defer f.dirs.mu.Unlock()
	for d, fd := range f.dirs.fds {
		if d.Name() == name {
			syscall.Close(fd)
			delete(f.dirs.fds, d)
		}
	}
}

// openBeneath opens rel inside dataset d's directory without following any
// symlink out of it or at the final component. A node's path is computed
// from the tree, so between lookup and open the entry may have been swapped
// for a symlink (to /etc/shadow, say); resolving beneath the dataset
// directory with openat2 makes such an open fail (ELOOP/EXDEV) instead of
// escaping the cache.
func (f *FS) openBeneath(d *cache.Dataset, rel string, flags int, mode uint32) (int, error) {
	dirfd, err := f.anchor(d)
	if err != nil {
		return -1, err
	}
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(dirfd, rel, &unix.OpenHow{
		Flags:   uint64(flags&openFlags | syscall.O_NOFOLLOW | syscall.O_CLOEXEC),
		Mode:    uint64(mode & 0o7777), // FUSE sends S_IFREG too; openat2 refuses it
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
}
