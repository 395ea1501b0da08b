package prefix

import (
	"fmt"
	"os"
	"path"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/jobdir"
)

// dirTable holds a dataset's directories in a directory prefix open while
// one Flush or Fetch works in them, each reached from its parent by one
// name without following links, and verified before use: a directory scrfs
// did not make (a link, or one another user planted, or one others may
// write to) is refused, naming it. Files are then created, opened and
// renamed by one name in a held directory, so no path is resolved twice.
type dirTable struct {
	root    *jobdir.Dir
	dataset string
	create  bool // Flush: make what is missing
	locate  func(rel string) string

	// known are the directory entries of a fetch, by path: whose owners
	// verify accepts.
	known map[string]*Entry

	// mu protects dirs; creation order is the entries' (parents first),
	// lookups come from the copy streams too.
	mu   sync.Mutex
	dirs map[string]*tableDir // by path below the dataset; "" is the dataset's
}

// tableDir is one directory of the dataset, held open.
type tableDir struct {
	f       *os.File
	rel     string
	created bool   // made by this Flush: its attributes are ours to set
	e       *Entry // its entry, if the node's share lists it
}

func newDirTable(root *jobdir.Dir, dataset string, create bool, locate func(string) string) *dirTable {
	return &dirTable{root: root, dataset: dataset, create: create, locate: locate,
		known: map[string]*Entry{}, dirs: map[string]*tableDir{}}
}

// close releases every directory.
func (t *dirTable) close() {
	for _, d := range t.dirs {
		d.f.Close()
	}
}

// name returns the path of rel below the dataset, for messages.
func (t *dirTable) name(rel string) string {
	if rel == "" {
		return t.locate(t.dataset)
	}
	return t.locate(t.dataset + "/" + rel)
}

// dir returns directory rel ("" the dataset's own), opening its parents
// first; with t.create, what is missing is made, e giving its attributes
// (nil: mode 0755, this user's).
func (t *dirTable) dir(rel string, e *Entry) (*tableDir, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dirLocked(rel, e)
}

func (t *dirTable) dirLocked(rel string, e *Entry) (*tableDir, error) {
	if d := t.dirs[rel]; d != nil {
		return d, nil
	}
	if e == nil {
		e = t.known[rel]
	}
	parentFd, name := t.root.Fd(), t.dataset
	if rel != "" {
		p := path.Dir(rel)
		if p == "." {
			p = ""
		}
		parent, err := t.dirLocked(p, nil)
		if err != nil {
			return nil, err
		}
		parentFd, name = int(parent.f.Fd()), path.Base(rel)
	}
	d, err := t.open(parentFd, name, rel, e)
	if err != nil {
		return nil, err
	}
	t.dirs[rel] = d
	return d, nil
}

// dirMode is the mode a Flush gives a directory it makes: the application's
// plus owner rwx (every node of the job adds files to shared directories),
// never writable by group or others, whom a directory of the prefix must
// not let plant files. The manifest keeps the exact mode; a fetch restores
// it.
func dirMode(e *Entry) uint32 {
	if e == nil {
		return 0o755
	}
	return (e.Mode | 0o700) &^ 0o022
}

func (t *dirTable) open(parentFd int, name, rel string, e *Entry) (*tableDir, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	created := false
	fd, err := unix.Openat(parentFd, name, flags, 0)
	if err == unix.ENOENT && t.create {
		mode := dirMode(e)
		switch err = unix.Mkdirat(parentFd, name, mode); err {
		case nil:
			created = true
		case unix.EEXIST: // another node of the job made it meanwhile
		}
		if err == nil || err == unix.EEXIST {
			fd, err = unix.Openat(parentFd, name, flags, 0)
		}
	}
	switch {
	case err == unix.ENOENT && !t.create:
		return nil, &CorruptError{Path: t.name(rel), Reason: "missing"}
	case err == unix.ELOOP || err == unix.ENOTDIR:
		why := "it is not a directory"
		var st unix.Stat_t
		if unix.Fstatat(parentFd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			why = "it is a symbolic link"
		}
		return nil, &jobdir.UnsafeError{Path: t.name(rel), Why: why + " where scrfs keeps a directory",
			Fix: "scrfs never follows links or writes through files in the prefix; another user may have planted it: remove it"}
	case err != nil:
		return nil, pathErr("open directory", t.name(rel), err)
	}
	d := &tableDir{f: os.NewFile(uintptr(fd), t.name(rel)), rel: rel, created: created, e: e}
	if created {
		// The mode exactly, whatever the umask, and the owner the
		// application gave it (when permitted), at once: another node
		// opening it checks its owner.
		err = unix.Fchmod(fd, dirMode(e))
		if err == nil && e != nil && (e.UID != uint32(os.Geteuid()) || e.GID != uint32(os.Getegid())) {
			if err = unix.Fchown(fd, int(e.UID), int(e.GID)); err == unix.EPERM {
				err = nil
			}
		}
	} else {
		err = t.verify(d)
	}
	if err != nil {
		d.f.Close()
		if _, ok := err.(*jobdir.UnsafeError); !ok {
			err = pathErr("set attributes of", t.name(rel), err)
		}
		return nil, err
	}
	return d, nil
}

// verify accepts a directory this Flush did not make if it belongs to this
// user (or, for a daemon run by root, to the owner the directory's entry
// records, whom an earlier flush gave it) and group and others cannot
// write to it.
func (t *dirTable) verify(d *tableDir) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(d.f.Fd()), &st); err != nil {
		return err
	}
	euid := uint32(os.Geteuid())
	owned := st.Uid == euid || d.e != nil && euid == 0 && st.Uid == d.e.UID
	switch {
	case !owned:
		return &jobdir.UnsafeError{Path: t.name(d.rel), Why: fmt.Sprintf("it belongs to uid %d, not to uid %d who runs scrfs", st.Uid, euid),
			Fix: "another user may have planted it to take over the flushed files; remove it, or flush to a prefix of your own"}
	case st.Mode&0o022 != 0:
		return &jobdir.UnsafeError{Path: t.name(d.rel), Why: fmt.Sprintf("it has mode %04o: group or others may write to it", st.Mode&0o7777),
			Fix: fmt.Sprintf("others could plant files in it; run chmod go-w %s", t.name(d.rel))}
	}
	return nil
}

// finish gives the directories this Flush made their mtimes, once every
// file is in place (adding entries changes a directory's mtime), and fsyncs
// every directory it used, so creations and renames are durable, with up
// to streams at once.
func (t *dirTable) finish(streams int) error {
	list := make([]*tableDir, 0, len(t.dirs))
	for _, d := range t.dirs {
		list = append(list, d)
	}
	for _, d := range list {
		if d.created && d.e != nil && d.e.Type == files.Dir {
			if err := futimens(int(d.f.Fd()), d.e.MtimeNs); err != nil {
				return pathErr("set mtime of", t.name(d.rel), err)
			}
		}
	}
	err := parallel(len(list), streams, func(i int) error {
		if err := list[i].f.Sync(); err != nil {
			return pathErr("fsync directory", t.name(list[i].rel), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if d := t.dirs[""]; d != nil && d.created {
		// The dataset's own directory is new: its entry in the prefix
		// must be durable too.
		return wrapPath("fsync directory", t.root.Path(), t.root.Sync())
	}
	return nil
}

// parallel runs f(0..n-1) with up to k goroutines and returns the first
// error. Directory syncs on a parallel file system are round trips; doing
// them one by one would dominate a flush of many directories.
func parallel(n, k int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range min(k, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
