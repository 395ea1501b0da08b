package fs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/layout"
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
	return filepath.Join(names...), true
}

// path returns the node's backing path in the cache.
func (n *dsNode) path() string {
	rel, _ := n.rel()
	return filepath.Join(n.ds.Dir(), rel)
}

// child returns the backing path and dataset-relative path of entry name in
// directory n.
func (n *dsNode) child(name string) (backing, rel string) {
	r, _ := n.rel()
	rel = filepath.Join(r, name)
	return filepath.Join(n.ds.Dir(), rel), rel
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
	p, _ := n.child(name)
	return n.fsys.entryNode(ctx, n.EmbeddedInode(), n.ds, p, out)
}

// Readdir lists a dataset directory, without scrfs's metadata directory.
func (n *dsNode) Readdir(ctx context.Context) (ds gofs.DirStream, errno syscall.Errno) {
	defer n.fsys.observe(opReaddir, time.Now(), &errno)
	if !n.root {
		return gofs.NewLoopbackDirStream(n.path())
	}
	des, err := os.ReadDir(n.path())
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	entries := make([]fuse.DirEntry, 0, len(des))
	for _, de := range des {
		if n.hidden(de.Name()) {
			continue
		}
		e := fuse.DirEntry{Name: de.Name(), Mode: modeOf(de.Type())}
		if info, err := de.Info(); err == nil {
			e.Ino = info.Sys().(*syscall.Stat_t).Ino
		}
		entries = append(entries, e)
	}
	return gofs.NewListDirStream(entries), 0
}

// Getattr stats the cache entry (through the open handle when there is one).
func (n *dsNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.observe(opGetattr, time.Now(), &errno)
	if h, ok := fh.(*handle); ok {
		return h.getattr(out)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(n.path(), &st); err != nil {
		return n.fsys.toErrno(err)
	}
	out.FromStat(&st)
	return 0
}

// Setattr changes mode, owner, size or times; never on a complete dataset.
func (n *dsNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.observe(opSetattr, time.Now(), &errno)
	if errno := n.writable(); errno != 0 {
		return errno
	}
	if h, ok := fh.(*handle); ok {
		return h.setattr(in, out)
	}
	p := n.path()
	var before syscall.Stat_t
	if err := syscall.Lstat(p, &before); err != nil {
		return n.fsys.toErrno(err)
	}
	if err := setattrPath(p, in); err != nil {
		return n.fsys.toErrno(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return n.fsys.toErrno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		n.ds.AddUsage(0, st.Size-before.Size)
	}
	out.FromStat(&st)
	return 0
}

// Readlink reads a symlink's target.
func (n *dsNode) Readlink(ctx context.Context) (target []byte, errno syscall.Errno) {
	defer n.fsys.observe(opReadlink, time.Now(), &errno)
	t, err := os.Readlink(n.path())
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	return []byte(t), 0
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
	fd, err := syscall.Open(n.path(), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return n.fsys.toErrno(err)
	}
	defer syscall.Close(fd)
	return n.fsys.toErrno(syscall.Fsync(fd))
}
