package jobdir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/scrfs/scrfs/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 turned out to be missing (ENOSYS: kernels
// before 5.6, or a seccomp filter that refuses it); every open then walks
// the name one component at a time.
var noOpenat2 atomic.Bool

// OpenFile opens name, a relative path below the directory ("state.json",
// "a/b"), without following a symbolic link anywhere on the way and without
// leaving the directory. flag and perm are os.OpenFile's.
func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	parts := strings.Split(name, "/")
	for _, p := range parts {
		if err := checkName(p); err != nil {
			return nil, err
		}
	}
	flag |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	fd, err := d.openat2(name, flag, perm)
	switch {
	case errors.Is(err, unix.ENOSYS):
		noOpenat2.Store(true)
		fd, err = d.walkOpen(parts, flag, perm)
	case errors.Is(err, unix.EPERM):
		// Some seccomp profiles refuse syscalls they do not know with
		// EPERM; if the plain walk works, openat2 is what was refused.
		if fd, err = d.walkOpen(parts, flag, perm); err == nil {
			noOpenat2.Store(true)
		}
	}
	if err != nil {
		return nil, d.openError(name, err)
	}
	return os.NewFile(uintptr(fd), d.Join(name)), nil
}

// openat2 opens name with the kernel refusing links and escapes.
func (d *Dir) openat2(name string, flag int, perm os.FileMode) (int, error) {
	if noOpenat2.Load() {
		return -1, unix.ENOSYS
	}
	how := unix.OpenHow{
		Flags:   uint64(flag),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flag&unix.O_CREAT != 0 {
		how.Mode = uint64(perm.Perm())
	}
	for range 8 {
		fd, err := unix.Openat2(d.Fd(), name, &how)
		// EAGAIN: a rename elsewhere raced the lookup; try again.
		if !errors.Is(err, unix.EAGAIN) {
			return fd, err
		}
	}
	return -1, unix.EAGAIN
}

// walkOpen opens parts one by one with O_NOFOLLOW, the fallback for
// kernels without openat2.
func (d *Dir) walkOpen(parts []string, flag int, perm os.FileMode) (int, error) {
	dirfd := d.Fd()
	for i, p := range parts {
		if i == len(parts)-1 {
			fd, err := unix.Openat(dirfd, p, flag, uint32(perm.Perm()))
			if dirfd != d.Fd() {
				unix.Close(dirfd)
			}
			return fd, err
		}
		fd, err := unix.Openat(dirfd, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		var st unix.Stat_t
		if errors.Is(err, unix.ENOTDIR) && unix.Fstatat(dirfd, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = unix.ELOOP // as openat2 says it
		}
		if dirfd != d.Fd() {
			unix.Close(dirfd)
		}
		if err != nil {
			return -1, err
		}
		dirfd = fd
	}
	return -1, unix.EINVAL
}

// ReadFile reads the regular file name, refusing links, other kinds of file
// and files larger than limit bytes (the files scrfs keeps are small; a huge
// one was not written by scrfs).
func (d *Dir) ReadFile(name string, limit int64) ([]byte, error) {
	f, err := d.OpenFile(name, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &UnsafeError{Path: d.Join(name), Why: "it is not a regular file (" + fi.Mode().Type().String() + ")",
			Fix: "scrfs only reads files it wrote; remove it"}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a file scrfs wrote", d.Join(name), limit)
	}
	return data, nil
}

// WriteFileAtomic replaces name with data so that a crash at any moment
// leaves either the old content or the new, never a mix (see package
// atomicfile: nothing planted is reused or followed). A failure is also
// reported to the OnWriteError hook.
func (d *Dir) WriteFileAtomic(name string, data []byte, perm os.FileMode) error {
	if err := checkName(name); err != nil {
		return err
	}
	err := atomicfile.WriteAt(d.f, name, data, perm)
	if err != nil && d.writeFailed != nil {
		d.writeFailed(name, err)
	}
	return err
}

// OnWriteError makes every failed WriteFileAtomic call f with the file's
// name and the error, whoever wrote: the directory's owner learns that its
// file system is full from the first writer that finds out. Call it before
// the Dir is shared; f must not block.
func (d *Dir) OnWriteError(f func(name string, err error)) { d.writeFailed = f }

// Sync flushes the directory's entries to stable storage.
func (d *Dir) Sync() error { return atomicfile.SyncDir(d.f) }

// Rename renames the entry oldName to newName, both in the directory.
func (d *Dir) Rename(oldName, newName string) error {
	if err := checkName(oldName); err != nil {
		return err
	}
	if err := checkName(newName); err != nil {
		return err
	}
	if err := unix.Renameat(d.Fd(), oldName, d.Fd(), newName); err != nil {
		return &os.LinkError{Op: "rename", Old: d.Join(oldName), New: d.Join(newName), Err: err}
	}
	return nil
}

// Remove removes the file (never a directory) name; a link is removed, not
// followed.
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.Fd(), name, 0); err != nil {
		return &os.PathError{Op: "remove", Path: d.Join(name), Err: err}
	}
	return nil
}

// Chmod sets the mode of the entry name (a socket the caller just bound).
func (d *Dir) Chmod(name string, perm os.FileMode) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Fchmodat(d.Fd(), name, uint32(perm.Perm()), 0); err != nil {
		return &os.PathError{Op: "chmod", Path: d.Join(name), Err: err}
	}
	return nil
}

// Mkdir creates the directory name with mode perm (less the umask).
func (d *Dir) Mkdir(name string, perm os.FileMode) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Mkdirat(d.Fd(), name, uint32(perm.Perm())); err != nil {
		return &os.PathError{Op: "mkdir", Path: d.Join(name), Err: err}
	}
	return nil
}

// SocketPath returns a path by which a unix socket called name in the
// directory can be bound or reached: through /proc/self/fd, so it lands in
// (or is looked up in) this very directory whatever happens to the path
// meanwhile; the plain path where /proc is not mounted.
func (d *Dir) SocketPath(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	p := fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name)
	if _, err := os.Stat(fmt.Sprintf("/proc/self/fd/%d", d.Fd())); err == nil {
		return p, nil
	}
	return d.Join(name), nil
}

// ReadDirNames lists the directory's entries (without "." and "..").
func (d *Dir) ReadDirNames() ([]string, error) {
	// A descriptor of its own: reading moves the offset of the one held.
	fd, err := unix.Openat(d.Fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	return f.Readdirnames(-1)
}
