package fs

import (
	"path"
	"strings"
	"syscall"
	"unsafe"

	"github.com/scrfs/scrfs/cache"

	"golang.org/x/sys/unix"
)

// Every operation inside a dataset names its entry relative to a directory
// descriptor, never by an absolute cache path: a dataset-relative path may
// be longer than PATH_MAX (the kernel hands FUSE one name at a time, so an
// application can build trees of any depth), and resolving beneath the
// dataset's directory without symlinks keeps every operation inside it
// even if an entry is swapped for a symlink between lookup and use.

// openFlags are the open(2) flags passed on to the cache file. openat2
// rejects the kernel-internal bits FUSE forwards (where open(2) ignores
// them), and O_DIRECT is dropped because the cache file system may not
// support it (tmpfs) and the daemon's own page cache is harmless.
const openFlags = unix.O_ACCMODE | unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY | unix.O_TRUNC |
	unix.O_APPEND | unix.O_NONBLOCK | unix.O_DSYNC | unix.O_SYNC | unix.O_NOATIME | unix.O_LARGEFILE |
	unix.O_DIRECTORY

// entry names a cache entry the way the *at system calls take it: a
// directory descriptor and one component ("." for the directory itself).
type entry struct {
	dir  int
	name string
	ref  *dirFD // holds dir open until release
}

// release lets go of the entry's directory descriptor.
func (e entry) release() { e.ref.release() }

// at resolves rel, a path inside dataset d ("" for its directory), to its
// parent directory's descriptor and last component. The caller releases
// the entry.
func (f *FS) at(d *cache.Dataset, rel string) (entry, error) {
	if rel == "" {
		ref, err := f.dirs.get(d, "")
		if err != nil {
			return entry{}, err
		}
		return entry{dir: ref.fd, name: ".", ref: ref}, nil
	}
	dir, name := path.Split(rel)
	ref, err := f.dirs.get(d, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return entry{}, err
	}
	return entry{dir: ref.fd, name: name, ref: ref}, nil
}

// open opens entry e without following a symlink at its last component.
func (e entry) open(flags int, mode uint32) (int, error) {
	return unix.Openat2(e.dir, e.name, &unix.OpenHow{
		Flags:   uint64(flags&openFlags | syscall.O_NOFOLLOW | syscall.O_CLOEXEC),
		Mode:    uint64(mode & 0o7777), // FUSE sends S_IFREG too; openat2 refuses it
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// lstat stats entry e without following a symlink. (syscall.Stat_t, which
// go-fuse takes, and unix.Stat_t are the same kernel struct.)
func (e entry) lstat(st *syscall.Stat_t) error {
	return unix.Fstatat(e.dir, e.name, (*unix.Stat_t)(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW)
}

// openBeneath opens rel inside dataset d.
func (f *FS) openBeneath(d *cache.Dataset, rel string, flags int, mode uint32) (int, error) {
	e, err := f.at(d, rel)
	if err != nil {
		return -1, err
	}
	defer e.release()
	return e.open(flags, mode)
}
