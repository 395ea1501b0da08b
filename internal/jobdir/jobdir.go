// Package jobdir creates and opens the per-user, per-job directories scrfs
// keeps under shared bases such as /dev/shm (mode 1777), so that the other
// users of a node cannot take them over.
//
// <base>/<user>/scrfs.<job> has a predictable path: another user can create
// it (or <base>/<user>) before the daemon starts and plant links, state or
// sockets in it. So every directory below the base is opened without
// following a symbolic link, and refused unless it belongs to the user
// running scrfs and no one else may write to it; the base itself must
// belong to root or that user and, if others may write to it, carry the
// sticky bit (so no one else can rename what we create there). The
// directories are then held open, and the files in them are reached
// relative to the open descriptor, never following a link
// (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it,
// openat with O_NOFOLLOW one component at a time where it does not).
package jobdir

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrUnsafe is wrapped by every *UnsafeError.
var ErrUnsafe = errors.New("unsafe directory")

// UnsafeError says why a path was refused and how to fix it.
type UnsafeError struct {
	Path string
	Why  string // what is wrong with it
	Fix  string // what the user can do
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("refusing %s: %s; %s", e.Path, e.Why, e.Fix)
}

// Unwrap makes errors.Is(err, ErrUnsafe) hold.
func (e *UnsafeError) Unwrap() error { return ErrUnsafe }

// Path names a directory as a base that is trusted as found (after the
// base checks) and the names below it that are created or verified one by
// one: {"/dev/shm", ["alice", "scrfs.42"]}.
type Path struct {
	Base  string
	Names []string
}

// String returns the directory's path.
func (p Path) String() string { return filepath.Join(append([]string{p.Base}, p.Names...)...) }

// Create is Create(p.Base, p.Names...).
func (p Path) Create() (*Dir, error) { return Create(p.Base, p.Names...) }

// Open is Open(p.Base, p.Names...).
func (p Path) Open() (*Dir, error) { return Open(p.Base, p.Names...) }

// Inspect opens an existing directory for a client of the daemon that owns
// it: as Open, except that root may open directories of any user (to reach
// a user's daemon). Links and directories others may write to are refused
// all the same.
func (p Path) Inspect() (*Dir, error) { return open(p.Base, p.Names, false, os.Geteuid() == 0) }

// Dir is a verified directory, held open. Its methods take names relative
// to it and never follow symbolic links.
type Dir struct {
	f    *os.File
	path string // for messages and for code that still needs a path
	// writeFailed hears of every failed WriteFileAtomic; set once,
	// before the Dir is shared (OnWriteError).
	writeFailed func(name string, err error)
}

// Create opens base/names[0]/names[1]/..., creating what is missing with
// mode 0700 (the base too, if it does not exist), and verifies every
// directory on the way as the package comment says.
func Create(base string, names ...string) (*Dir, error) { return open(base, names, true, false) }

// Open is Create without creating anything: the CLI uses it to find a
// daemon's control directory.
func Open(base string, names ...string) (*Dir, error) { return open(base, names, false, false) }

// open opens base/names..., creating what is missing if create; anyOwner
// accepts directories that belong to another user.
func open(base string, names []string, create, anyOwner bool) (*Dir, error) {
	if create {
		if err := os.MkdirAll(base, 0o700); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(base, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d := &Dir{f: f, path: filepath.Clean(base)}
	if err := checkBase(d, anyOwner); err != nil {
		d.Close()
		return nil, err
	}
	for _, name := range names {
		next, err := d.sub(name, create, anyOwner)
		d.Close()
		if err != nil {
			return nil, err
		}
		d = next
	}
	return d, nil
}

// Path returns the directory's path, for messages and for code below the
// directory that works with paths.
func (d *Dir) Path() string { return d.path }

// Fd returns the open directory's descriptor; it stays valid until Close.
func (d *Dir) Fd() int { return int(d.f.Fd()) }

// Close releases the directory.
func (d *Dir) Close() error { return d.f.Close() }

// Join returns the path of name below the directory, for messages.
func (d *Dir) Join(name string) string { return filepath.Join(d.path, name) }

// Sub opens the subdirectory name (creating it with mode 0700 if create),
// verified like the directories Create opens.
func (d *Dir) Sub(name string, create bool) (*Dir, error) { return d.sub(name, create, false) }

func (d *Dir) sub(name string, create, anyOwner bool) (*Dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	path := d.Join(name)
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(d.Fd(), name, flags, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err = unix.Mkdirat(d.Fd(), name, 0o700); err == nil || errors.Is(err, unix.EEXIST) {
			fd, err = unix.Openat(d.Fd(), name, flags, 0)
		}
	}
	if err != nil {
		return nil, d.openError(name, err)
	}
	sub := &Dir{f: os.NewFile(uintptr(fd), path), path: path}
	if err := checkOwn(sub, anyOwner); err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// openError turns the error of opening name without following links into a
// clear one: a link where a file or directory should be is an UnsafeError.
func (d *Dir) openError(name string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
		var st unix.Stat_t
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) ||
			unix.Fstatat(d.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return &UnsafeError{Path: d.Join(name), Why: "it is (or goes through) a symbolic link",
				Fix: "scrfs never follows links in its own directories; remove the link (it may have been planted by another user)"}
		}
	}
	return &os.PathError{Op: "open", Path: d.Join(name), Err: err}
}

// checkName accepts one path component.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("jobdir: %q is not a single file name", name)
	}
	return nil
}

// checkBase accepts a base directory owned by root or by us that no one else
// may write to, or only with the sticky bit set (like /dev/shm and /tmp).
func checkBase(d *Dir, anyOwner bool) error {
	st, err := stat(d)
	if err != nil {
		return err
	}
	euid := uint32(os.Geteuid())
	switch {
	case st.Uid != 0 && st.Uid != euid && !anyOwner:
		return &UnsafeError{Path: d.path, Why: fmt.Sprintf("the base directory belongs to %s, neither root nor you (%s)", who(st.Uid), who(euid)),
			Fix: "its owner could replace anything scrfs creates there; choose a base of your own or a system one like /dev/shm (the setting that named it: paths.cache_base, paths.control_base or paths.prefix)"}
	case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
		return &UnsafeError{Path: d.path, Why: fmt.Sprintf("the base directory has mode %04o: others may write to it and it has no sticky bit", st.Mode&0o7777),
			Fix: fmt.Sprintf("anyone could rename what scrfs creates there; run chmod +t %s (as /dev/shm and /tmp are) or choose another base", d.path)}
	}
	return nil
}

// checkOwn accepts a directory that belongs to us and that group and others
// cannot write to.
func checkOwn(d *Dir, anyOwner bool) error {
	st, err := stat(d)
	if err != nil {
		return err
	}
	euid := uint32(os.Geteuid())
	switch {
	case st.Uid != euid && !anyOwner:
		return &UnsafeError{Path: d.path, Why: fmt.Sprintf("it belongs to %s, not to %s who runs scrfs", who(st.Uid), who(euid)),
			Fix: "another user may have created it to take over scrfs's files; have it removed, or choose another base (the setting that named it: paths.cache_base, paths.control_base or paths.prefix)"}
	case st.Mode&0o022 != 0:
		return &UnsafeError{Path: d.path, Why: fmt.Sprintf("it has mode %04o: group or others may write to it", st.Mode&0o7777),
			Fix: fmt.Sprintf("run chmod go-w %s", d.path)}
	}
	return nil
}

func stat(d *Dir) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.Fd(), &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: d.path, Err: err}
	}
	return &st, nil
}

// who names a uid for messages: "uid 1001 (alice)".
func who(uid uint32) string {
	s := "uid " + strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		s += " (" + u.Username + ")"
	}
	return s
}

// Base opens path as a base directory, as Create opens its base, for a tree
// that scrfs shares with others by design, like the prefix on a parallel
// file system: created (with its parents) with mode 0755 if it is missing
// and create is set; a final symbolic link is followed only if it belongs
// to you or root (one another user planted in a shared directory is
// refused, whatever fs.protected_symlinks says); and the directory must
// pass the base checks (root's or yours, sticky if others may write to it).
func Base(path string, create bool) (*Dir, error) {
	path = filepath.Clean(path)
	if create {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, err
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		var st unix.Stat_t
		if lerr := unix.Lstat(path, &st); lerr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if st.Uid != 0 && st.Uid != uint32(os.Geteuid()) {
				return nil, &UnsafeError{Path: path, Why: fmt.Sprintf("it is a symbolic link that belongs to %s, neither root nor you", who(st.Uid)),
					Fix: "another user may have planted it to redirect scrfs; remove it, or give the directory it should point to"}
			}
			fd, err = unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	d := &Dir{f: os.NewFile(uintptr(fd), path), path: path}
	if err := checkBase(d, false); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}
