package fs

import (
	"context"
	"path"
	"slices"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/layout"
	"golang.org/x/sys/unix"
)

// dsNode is a file, directory or symlink of a dataset: a loopback onto the
// dataset's cache directory.
type dsNode struct {
	gofs.Inode
	fsys *FS
	ds   *cache.Dataset
	// root marks the directory a KindDir dataset is anchored at; its
	// backing path is the dataset directory itself.
	root bool

	pt ptOpens // its opens' I/O modes and trackers (written.go)
}

// rel returns the node's path inside its dataset's cache directory, and
// false for a node that is no longer in any directory (unlinked while open).
func (n *dsNode) rel() (string, bool) {
	if n.root {
		return "", true
	}
	var names []string
	cur := n.EmbeddedInode()
	for {
		name, parent := cur.Parent()
		if parent == nil {
			return "", false
		}
		names = append(names, name)
		p, ok := parent.Operations().(*dsNode)
		if !ok || p.root {
			// Reached the dataset's anchor: its root directory, or the
			// namespace directory a flat dataset's files sit in.
			break
		}
		cur = parent
	}
	slices.Reverse(names)
	return path.Join(names...), true
}

// at resolves the node's own cache entry; ENOENT for a node that is no
// longer in any directory (unlinked while open). The caller releases it.
func (n *dsNode) at() (entry, syscall.Errno) {
	rel, ok := n.rel()
	if !ok {
		return entry{}, syscall.ENOENT
	}
	e, err := n.fsys.at(n.ds, rel)
	if err != nil {
		return entry{}, n.fsys.toErrno(err)
	}
	return e, 0
}

// childAt resolves entry name of directory n, and returns its path inside
// the dataset. The caller releases the entry.
func (n *dsNode) childAt(name string) (entry, string, syscall.Errno) {
	r, ok := n.rel()
	if !ok {
		return entry{}, "", syscall.ENOENT
	}
	rel := path.Join(r, name)
	e, err := n.fsys.at(n.ds, rel)
	if err != nil {
		return entry{}, "", n.fsys.toErrno(err)
	}
	return e, rel, 0
}

// hidden reports names the application may neither see nor create: scrfs's
// own metadata directory at the top of every dataset.
func (n *dsNode) hidden(name string) bool { return n.root && name == layout.MetaDir }

// writable fails with EROFS once the dataset is complete.
func (n *dsNode) writable() syscall.Errno {
	if !n.ds.Writable() {
		return syscall.EROFS
	}
	return 0
}

// Lookup finds an entry in a dataset directory.
func (n *dsNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opLookup, time.Now(), &errno)
	if n.hidden(name) {
		return nil, syscall.ENOENT
	}
	e, rel, errno := n.childAt(name)
	if errno != 0 {
		return nil, errno
	}
	defer e.release()
	if n.fsys.sharedFile(n.ds, rel) {
		// This node's copy holds only its part of the file.
		return n.fsys.remoteChild(ctx, n.EmbeddedInode(), dsSource{n.fsys, n.ds}, rel, out)
	}
	ch, errno = n.fsys.entryNode(ctx, n.EmbeddedInode(), n.ds, e, out)
	switch {
	case errno != syscall.ENOENT:
		return ch, errno
	case n.fsys.namesShared(n.ds):
		return n.lookupElsewhere(ctx, name, rel, out)
	}
	return n.fsys.remoteChild(ctx, n.EmbeddedInode(), dsSource{n.fsys, n.ds}, rel, out)
}

// Readdir lists a dataset directory; at the dataset's root, without
// scrfs's metadata directory.
func (n *dsNode) Readdir(ctx context.Context) (ds gofs.DirStream, errno syscall.Errno) {
	defer n.fsys.observe(opReaddir, time.Now(), &errno)
	e, errno := n.at()
	if errno != 0 {
		return nil, errno
	}
	defer e.release()
	fd, err := e.open(syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	s, errno := gofs.NewLoopbackDirStreamFd(fd)
	if errno != 0 {
		return s, errno
	}
	if n.root {
		// ".." of a dataset's root is the mount directory it sits in, not
		// the cache directory the kernel reports.
		parentIno := n.StableAttr().Ino
		if _, p := n.Parent(); p != nil {
			parentIno = p.StableAttr().Ino
		}
		s = &datasetRootStream{DirStream: s, parentIno: parentIno}
	}
	rel, _ := n.rel()
	switch {
	case n.fsys.namesShared(n.ds):
		return n.fsys.withNames(ctx, s, n.ds, rel)
	case n.fsys.view(n.ds) == nil:
		return s, 0
	}
	return n.fsys.withRemote(s, n.ds, rel)
}

// Getattr stats the cache entry (through the open handle when there is one).
func (n *dsNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.observe(opGetattr, time.Now(), &errno)
	if h, ok := fh.(*handle); ok {
		return h.getattr(out)
	}
	e, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer e.release()
	var st syscall.Stat_t
	if err := e.lstat(&st); err != nil {
		return n.fsys.toErrno(err)
	}
	out.FromStat(&st)
	if !n.ds.Writable() {
		out.SetTimeout(immutableTimeout)
	}
	return 0
}

// Setattr changes mode, owner, size or times; never on a complete dataset.
func (n *dsNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.observe(opSetattr, time.Now(), &errno)
	if errno := n.writable(); errno != 0 {
		return errno
	}
	defer func() {
		if errno == 0 {
			n.fsys.setattrCached(out)
		}
	}()
	if h, ok := fh.(*handle); ok {
		return h.setattr(in, out)
	}
	e, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer e.release()
	var before syscall.Stat_t
	if err := e.lstat(&before); err != nil {
		return n.fsys.toErrno(err)
	}
	if _, chmod := in.GetMode(); chmod && before.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return syscall.EOPNOTSUPP // a symlink has no mode of its own; never follow it
	}
	if err := e.setattr(in); err != nil {
		return n.fsys.toErrno(err)
	}
	var st syscall.Stat_t
	if err := e.lstat(&st); err != nil {
		return n.fsys.toErrno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		n.ds.AddUsage(0, st.Size-before.Size)
		if _, ok := in.GetSize(); ok {
			n.truncated(st.Size)
		}
	}
	out.FromStat(&st)
	return 0
}

// Readlink reads a symlink's target.
func (n *dsNode) Readlink(ctx context.Context) (target []byte, errno syscall.Errno) {
	defer n.fsys.observe(opReadlink, time.Now(), &errno)
	e, errno := n.at()
	if errno != 0 {
		return nil, errno
	}
	defer e.release()
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		k, err := unix.Readlinkat(e.dir, e.name, buf)
		if err != nil {
			return nil, n.fsys.toErrno(err)
		}
		if k < size {
			return buf[:k], 0
		}
	}
}

// Statfs reports the cache file system.
func (n *dsNode) Statfs(ctx context.Context, out *fuse.StatfsOut) (errno syscall.Errno) {
	defer n.fsys.observe(opStatfs, time.Now(), &errno)
	return n.fsys.statfs(out)
}

// Fsync on a directory (fsync(dirfd) after a rename) syncs the backing
// directory; file handles sync their own descriptor.
func (n *dsNode) Fsync(ctx context.Context, fh gofs.FileHandle, flags uint32) (errno syscall.Errno) {
	defer n.fsys.observe(opFsync, time.Now(), &errno)
	if h, ok := fh.(*handle); ok {
		return h.fsync(flags)
	}
	e, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer e.release()
	fd, err := e.open(syscall.O_RDONLY, 0)
	if err != nil {
		return n.fsys.toErrno(err)
	}
	defer syscall.Close(fd)
	return n.fsys.toErrno(syscall.Fsync(fd))
}
