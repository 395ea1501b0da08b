package fs

import (
	"context"
	"errors"
	"path"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
	"golang.org/x/sys/unix"
)

// While a dataset is written, the names inside it are the job's (package
// names): a directory or file created on any node exists on every node
// before the call that made it returns, while the bytes stay where they
// are written. Before the mount changes a name inside a writing dataset it
// tells the name's owner (Job.CreateName, RemoveName, RenameName); a
// lookup that misses here asks the owner (LookupName) and makes this
// node's own copy of the name (a directory, a symlink, or an empty file
// that is only a placeholder until a writer opens it here); a listing
// adds what other nodes created (ListNames). In a job of one node
// (Job.Shared false) none of this is asked.

// namesShared reports whether names inside d are the job's: d is being
// written, in a job of more than one node.
func (f *FS) namesShared(d *cache.Dataset) bool { return f.job.Shared() && d.Writable() }

// notHereTimeout is how long the kernel may keep a "no such file" answer
// inside a dataset being written by several nodes: not at all, since
// another node may create the name at any moment (the mount's
// negative_timeout would hide it for that long).
const notHereTimeout = time.Nanosecond

// lookupElsewhere finds entry name of directory n (rel inside its dataset)
// that this node does not have: another node created it. It makes this
// node's copy of the name and returns its node.
func (n *dsNode) lookupElsewhere(ctx context.Context, name, rel string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	f := n.fsys
	m, err := f.job.LookupName(ctx, n.ds.Name(), rel)
	if err != nil {
		if errno := f.toErrno(err); errno != syscall.ENOENT {
			return nil, errno
		}
		out.SetEntryTimeout(notHereTimeout)
		return nil, syscall.ENOENT
	}
	e, _, errno := n.childAt(name)
	if errno != 0 {
		return nil, errno
	}
	defer e.release()
	switch m.Type {
	case files.Dir:
		err = unix.Mkdirat(e.dir, e.name, m.Mode)
	case files.Symlink:
		err = unix.Symlinkat(m.Target, e.dir, e.name)
	case files.Regular:
		var fd int
		if fd, err = e.open(syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, m.Mode); err == nil {
			syscall.Close(fd)
			n.ds.Placeholder(rel)
		}
	default:
		return nil, syscall.EIO
	}
	if err != nil && !errors.Is(err, syscall.EEXIST) {
		return nil, f.toErrno(err)
	}
	return f.entryNode(ctx, n.EmbeddedInode(), n.ds, e, out)
}

// createName tells the job that entry rel of writing dataset d of type t
// is being created here, before it is; excl fails if any node has it.
// It reports whether another node holds the name too.
func (f *FS) createName(ctx context.Context, d *cache.Dataset, rel string, m files.Meta, excl bool) (shared bool, errno syscall.Errno) {
	if !f.namesShared(d) {
		return false, 0
	}
	shared, err := f.job.CreateName(ctx, d.Name(), rel, m, excl)
	return shared, f.toErrno(err)
}

// removeName tells the job that entry rel of d is being removed here. A
// name the job does not know (created before this node's run shared
// names) is this node's alone.
func (f *FS) removeName(ctx context.Context, d *cache.Dataset, rel string, dir bool) syscall.Errno {
	if !f.namesShared(d) {
		return 0
	}
	if errno := f.toErrno(f.job.RemoveName(ctx, d.Name(), rel, dir)); errno != syscall.ENOENT {
		return errno
	}
	return 0
}

// renameName tells the job that entry e of n (from inside its dataset) is
// being renamed to to: a file or symlink, or a directory with everything
// below it (every node's copy moves with it). Exchanging two entries is
// not done job-wide: EINVAL.
func (n *dsNode) renameName(ctx context.Context, e entry, from, to string, flags uint32) syscall.Errno {
	f := n.fsys
	if !f.namesShared(n.ds) {
		return 0
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		return syscall.EINVAL
	}
	var st syscall.Stat_t
	if err := e.lstat(&st); err != nil {
		return f.toErrno(err)
	}
	dir := st.Mode&syscall.S_IFMT == syscall.S_IFDIR
	if flags&unix.RENAME_NOREPLACE != 0 && !dir {
		if _, err := f.job.LookupName(ctx, n.ds.Name(), to); err == nil {
			return syscall.EEXIST
		}
	}
	errno := f.toErrno(f.job.RenameName(ctx, n.ds.Name(), from, to, dir))
	if errno == syscall.ENOENT { // the job does not know it: this node's alone
		return 0
	}
	return errno
}

// withNames lists directory rel of writing dataset d: what local lists,
// then the names only other nodes created.
func (f *FS) withNames(ctx context.Context, local gofs.DirStream, d *cache.Dataset, rel string) (gofs.DirStream, syscall.Errno) {
	defer local.Close()
	others, err := f.job.ListNames(ctx, d.Name(), rel)
	if err != nil {
		return nil, f.toErrno(err)
	}
	var entries []fuse.DirEntry
	seen := map[string]bool{}
	for local.HasNext() {
		e, errno := local.Next()
		if errno != 0 {
			return nil, errno
		}
		entries = append(entries, e)
		seen[e.Name] = true
	}
	for _, m := range others {
		if !seen[m.Path] && !(rel == "" && m.Path == layout.MetaDir) {
			entries = append(entries, fuse.DirEntry{Name: m.Path, Mode: modeOfType(m.Type)})
		}
	}
	return gofs.NewListDirStream(entries), 0
}

// modeOfType is the S_IFMT bits of an entry of type t.
func modeOfType(t files.Type) uint32 {
	switch t {
	case files.Dir:
		return syscall.S_IFDIR
	case files.Symlink:
		return syscall.S_IFLNK
	}
	return syscall.S_IFREG
}

// entryChanged drops entry rel of writing dataset info from the node tree
// and the kernel's name cache: another node's application removed or
// renamed it, and this node's copy followed. The application's call there
// returns once every node shows the change, so this waits for the kernel
// to drop the name; but at most notifyBound, from another goroutine, since
// a notification waits for any request in that directory (see forget).
// The store reports the event from the job's request, not a FUSE one.
func (f *FS) entryChanged(info cache.Info, rel string) {
	if d := f.store.Get(info.Name); d != nil {
		f.dirs.renamed(d) // a directory may have moved: cached descriptors name others
	}
	r := info.Route()
	if r.Kind != cache.KindDir {
		return
	}
	parent, ok := f.findNS(parentOf(r.Root))
	if !ok {
		return
	}
	cur := parent.GetChild(path.Base(r.Root))
	if dir := path.Dir(rel); dir != "." {
		for _, name := range splitPath(dir) {
			if cur == nil {
				return
			}
			cur = cur.GetChild(name)
		}
	}
	if cur == nil {
		return
	}
	base := path.Base(rel)
	cur.RmChild(base)
	if f.server.Load() == nil {
		return
	}
	notified := make(chan struct{})
	go func() {
		cur.NotifyEntry(base)
		close(notified)
	}()
	select {
	case <-notified:
	case <-time.After(notifyBound):
		f.log.Warn("the kernel took long to drop a name another node changed", "dataset", info.Name, "path", rel)
	}
}

// notifyBound bounds how long entryChanged waits for the kernel.
const notifyBound = time.Second
