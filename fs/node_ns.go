package fs

import (
	"context"
	"errors"
	"path"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
	"golang.org/x/sys/unix"
)

// nsNode is a directory of the mount that is not a dataset: the mount root,
// or a directory like "ckpt" that holds flat datasets' files. Its entries are
// its namespace subdirectories (children in the in-memory tree) plus the
// datasets the store anchors in it, computed on every lookup and readdir.
type nsNode struct {
	gofs.Inode
	fsys *FS

	mu    sync.Mutex // protects the attributes below
	mode  uint32     // permission bits
	uid   uint32
	gid   uint32
	mtime time.Time
	ctime time.Time
}

func (f *FS) newNSNode(mode uint32) *nsNode {
	t := time.Now()
	return &nsNode{fsys: f, mode: mode & 0o7777, uid: f.owner.uid, gid: f.owner.gid, mtime: t, ctime: t}
}

// mountPath is the node's path relative to the mount root ("" for the root).
func (n *nsNode) mountPath() string { return n.Path(nil) }

func (n *nsNode) childPath(name string) string { return path.Join(n.mountPath(), name) }

func (n *nsNode) fillAttr(out *fuse.Attr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out.Mode = syscall.S_IFDIR | n.mode
	out.Nlink = 2
	out.Size = 4096
	out.Blksize = 4096
	out.Owner = fuse.Owner{Uid: n.uid, Gid: n.gid}
	out.Ino = n.StableAttr().Ino
	out.SetTimes(&n.mtime, &n.mtime, &n.ctime)
}

// mayChange checks that the caller may create or remove entries here. The
// kernel checks this itself only with allow_other (default_permissions);
// otherwise the caller is the mounting user, held to the directory's owner
// write bit as the cache file system would hold it.
func (n *nsNode) mayChange(ctx context.Context) syscall.Errno {
	if caller, ok := fuse.FromContext(ctx); ok && caller.Uid == 0 {
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mode&0o200 == 0 {
		return syscall.EACCES
	}
	return 0
}

func (n *nsNode) touch() {
	n.mu.Lock()
	n.mtime, n.ctime = time.Now(), time.Now()
	n.mu.Unlock()
}

// Getattr returns the directory's in-memory attributes.
func (n *nsNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.observe(opGetattr, time.Now(), &errno)
	n.fillAttr(&out.Attr)
	return 0
}

// Setattr changes mode, owner or times of a namespace directory; the mode is
// persisted so it survives a restart.
func (n *nsNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.observe(opSetattr, time.Now(), &errno)
	if _, ok := in.GetSize(); ok {
		return syscall.EISDIR
	}
	n.mu.Lock()
	if m, ok := in.GetMode(); ok {
		n.mode = m & 0o7777
	}
	if uid, ok := in.GetUID(); ok {
		n.uid = uid
	}
	if gid, ok := in.GetGID(); ok {
		n.gid = gid
	}
	if mt, ok := in.GetMTime(); ok {
		n.mtime = mt
	}
	n.ctime = time.Now()
	mode := n.mode
	n.mu.Unlock()
	if n.mountPath() != "" {
		if err := n.fsys.store.AddNamespaceDir(n.mountPath(), mode); err != nil {
			return n.fsys.toErrno(err)
		}
	}
	n.fillAttr(&out.Attr)
	n.fsys.setattrCached(out)
	return 0
}

// Statfs reports the cache file system.
func (n *nsNode) Statfs(ctx context.Context, out *fuse.StatfsOut) (errno syscall.Errno) {
	defer n.fsys.observe(opStatfs, time.Now(), &errno)
	return n.fsys.statfs(out)
}

// Mkdir creates a dataset when the new directory routes to one, and a plain
// namespace directory otherwise.
func (n *nsNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opMkdir, time.Now(), &errno)
	if errno := n.mayChange(ctx); errno != 0 {
		return nil, errno
	}
	p := n.childPath(name)
	r, err := n.fsys.router.Route(p, true)
	if errors.Is(err, cache.ErrNoDataset) {
		if err := n.fsys.store.AddNamespaceDir(p, mode&0o7777); err != nil {
			return nil, n.fsys.toErrno(err)
		}
		child := n.fsys.newNSNode(mode)
		n.touch()
		child.fillAttr(&out.Attr)
		return n.NewPersistentInode(ctx, child, gofs.StableAttr{Mode: syscall.S_IFDIR}), 0
	}
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	d, created, err := n.fsys.obtain(ctx, r)
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	if !created {
		return nil, syscall.EEXIST
	}
	e, err := n.fsys.at(d, "")
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	defer e.release()
	if err := unix.Fchmodat(e.dir, e.name, mode&0o7777, 0); err != nil {
		return nil, n.fsys.toErrno(err)
	}
	n.fsys.preserveOwner(ctx, e)
	n.touch()
	return n.datasetRootNode(ctx, d, out)
}

// Rmdir removes a namespace directory that holds nothing, or the directory
// of a dataset that is still being written and holds no files.
func (n *nsNode) Rmdir(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.fsys.observe(opRmdir, time.Now(), &errno)
	if errno := n.mayChange(ctx); errno != 0 {
		return errno
	}
	p := n.childPath(name)
	if child, ok := n.nsChild(name); ok {
		if len(child.Children()) > 0 || len(child.datasetEntries(ctx)) > 0 {
			return syscall.ENOTEMPTY
		}
		if err := n.fsys.store.RemoveNamespaceDir(p); err != nil {
			return n.fsys.toErrno(err)
		}
		n.touch()
		return 0
	}
	d := n.anchoredDataset(p, true)
	if d == nil {
		return syscall.ENOENT
	}
	if err := n.fsys.store.Remove(d); err != nil {
		return n.fsys.toErrno(err)
	}
	n.fsys.dirs.drop(d.Name())
	n.touch()
	return 0
}

// nsChild returns the namespace subdirectory called name, if there is one.
func (n *nsNode) nsChild(name string) (*nsNode, bool) {
	ch := n.GetChild(name)
	if ch == nil {
		return nil, false
	}
	ns, ok := ch.Operations().(*nsNode)
	return ns, ok
}

// anchoredDataset returns the dataset that mount path p (a child of n)
// belongs to: the dataset whose directory it is (dir), or the flat dataset
// it is a file of. It returns nil when no existing dataset claims p.
func (n *nsNode) anchoredDataset(p string, dir bool) *cache.Dataset {
	r, err := n.fsys.router.Route(p, dir)
	if err != nil {
		return nil
	}
	d := n.fsys.store.Get(r.Name)
	if d == nil || d.Route() != r {
		return nil
	}
	return d
}

// Fsync of a namespace directory has nothing to sync: its existence is
// persisted by the store when it changes.
func (n *nsNode) Fsync(ctx context.Context, fh gofs.FileHandle, flags uint32) (errno syscall.Errno) {
	defer n.fsys.observe(opFsync, time.Now(), &errno)
	return 0
}
