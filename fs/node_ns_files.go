package fs

import (
	"context"
	"errors"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
	"golang.org/x/sys/unix"
)

// flatDataset returns the writing dataset a new non-directory entry at mount
// path p (a child of n) belongs to, creating the dataset if needed. Paths
// that match no dataset are refused with EPERM and a log line: silently
// accepting a file nobody will protect would be worse.
func (n *nsNode) flatDataset(ctx context.Context, p string) (*cache.Dataset, syscall.Errno) {
	r, err := n.fsys.router.Route(p, false)
	if errors.Is(err, cache.ErrNoDataset) {
		n.fsys.log.Warn("refused a file outside any dataset (check datasets.match)", "path", "/"+p)
		return nil, syscall.EPERM
	}
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	d, _, err := n.fsys.obtain(ctx, r)
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	return d, 0
}

// Create creates a flat dataset's file.
func (n *nsNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (ch *gofs.Inode, fh gofs.FileHandle, fuseFlags uint32, errno syscall.Errno) {
	defer n.fsys.observe(opCreate, time.Now(), &errno)
	if errno := n.mayChange(ctx); errno != 0 {
		return nil, nil, 0, errno
	}
	if n.isPointer(name) {
		return n.createPointer(ctx, name, flags, mode, out)
	}
	d, errno := n.flatDataset(ctx, n.childPath(name))
	if errno != 0 {
		return nil, nil, 0, errno
	}
	n.touch()
	return n.fsys.create(ctx, n.EmbeddedInode(), d, name, true, flags, mode, out)
}

// Mknod creates a flat dataset's entry other than by open(O_CREAT).
func (n *nsNode) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opMknod, time.Now(), &errno)
	if errno := n.mayChange(ctx); errno != 0 {
		return nil, errno
	}
	if n.isPointer(name) {
		if mode&syscall.S_IFMT != syscall.S_IFREG {
			return nil, syscall.EPERM // a pointer file is a file or a symlink
		}
		ch, _, _, errno := n.createPointer(ctx, name, syscall.O_EXCL, mode, out)
		return ch, errno
	}
	d, errno := n.flatDataset(ctx, n.childPath(name))
	if errno != 0 {
		return nil, errno
	}
	e, err := n.fsys.at(d, name)
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	defer e.release()
	n.touch()
	return n.fsys.mknod(ctx, n.EmbeddedInode(), d, e, name, mode, rdev, out)
}

// Symlink creates a symbolic link in a flat dataset.
func (n *nsNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opSymlink, time.Now(), &errno)
	if errno := n.mayChange(ctx); errno != 0 {
		return nil, errno
	}
	if n.isPointer(name) {
		return n.symlinkPointer(ctx, target, name, out)
	}
	d, errno := n.flatDataset(ctx, n.childPath(name))
	if errno != 0 {
		return nil, errno
	}
	e, err := n.fsys.at(d, name)
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	defer e.release()
	n.touch()
	return n.fsys.symlink(ctx, n.EmbeddedInode(), d, e, name, target, out)
}

// Link makes a hard link to a file of the same flat dataset.
func (n *nsNode) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opLink, time.Now(), &errno)
	if errno := n.mayChange(ctx); errno != 0 {
		return nil, errno
	}
	t, ok := target.(*dsNode)
	d := n.anchoredDataset(n.childPath(name), false)
	if !ok || d == nil || d != t.ds {
		return nil, syscall.EXDEV
	}
	e, err := n.fsys.at(d, name)
	if err != nil {
		return nil, n.fsys.toErrno(err)
	}
	defer e.release()
	n.touch()
	return n.fsys.link(ctx, n.EmbeddedInode(), t, e, name, out)
}

// Unlink removes a flat dataset's file.
func (n *nsNode) Unlink(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.fsys.observe(opUnlink, time.Now(), &errno)
	if errno := n.mayChange(ctx); errno != 0 {
		return errno
	}
	if n.isPointer(name) {
		return n.unlinkPointer(ctx, name)
	}
	d := n.anchoredDataset(n.childPath(name), false)
	if d == nil {
		return syscall.ENOENT
	}
	e, err := n.fsys.at(d, name)
	if err != nil {
		return n.fsys.toErrno(err)
	}
	defer e.release()
	n.touch()
	return n.fsys.unlink(d, e)
}

// Rename moves entries of this directory. Within the namespace it renames a
// dataset (its directory), a flat dataset's file within its dataset, or an
// empty namespace directory; anything that would move bytes between datasets
// is EXDEV, which mv(1) answers by copying.
func (n *nsNode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) (errno syscall.Errno) {
	defer n.fsys.observe(opRename, time.Now(), &errno)
	if errno := n.mayChange(ctx); errno != 0 {
		return errno
	}
	np, ok := newParent.(*nsNode)
	if !ok {
		return syscall.EXDEV
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		return syscall.EINVAL
	}
	from, to := n.childPath(name), np.childPath(newName)
	if _, ok := n.fsys.store.Pointer(name); ok && n.isPointer(name) {
		if np != n || !n.isPointer(newName) {
			return syscall.EXDEV // a pointer file stays at the root, and out of datasets
		}
		return n.renamePointer(ctx, name, newName, flags)
	}
	if child, ok := n.nsChild(name); ok {
		return n.renameNS(ctx, child, from, np, newName, to)
	}
	if d := n.anchoredDataset(from, true); d != nil {
		return n.renameDataset(ctx, d, np, newName, to, flags)
	}
	if d := n.anchoredDataset(from, false); d != nil {
		if np.anchoredDatasetOrNew(to) != d.Name() || np != n {
			return syscall.EXDEV
		}
		e, err := n.fsys.at(d, name)
		if err != nil {
			return n.fsys.toErrno(err)
		}
		defer e.release()
		if err := unix.Renameat2(e.dir, name, e.dir, newName, uint(flags)); err != nil {
			return n.fsys.toErrno(err)
		}
		n.touch()
		d.EntryAppeared(newName)
		return 0
	}
	return syscall.ENOENT
}

// anchoredDatasetOrNew names the dataset a flat file at p would belong to.
func (n *nsNode) anchoredDatasetOrNew(p string) string {
	r, err := n.fsys.router.Route(p, false)
	if err != nil {
		return ""
	}
	return r.Name
}

func (n *nsNode) renameNS(ctx context.Context, child *nsNode, from string, np *nsNode, newName, to string) syscall.Errno {
	// Datasets anchored below would have to move with it; mv copes with EXDEV.
	if len(child.Children()) > 0 || len(child.datasetEntries(ctx)) > 0 {
		return syscall.EXDEV
	}
	if np.GetChild(newName) != nil || np.anchoredDataset(to, true) != nil {
		return syscall.EEXIST
	}
	if _, err := n.fsys.router.Route(to, true); err == nil {
		return syscall.EXDEV // it would become a dataset
	}
	child.mu.Lock()
	mode := child.mode
	child.mu.Unlock()
	if err := n.fsys.store.AddNamespaceDir(to, mode); err != nil {
		return n.fsys.toErrno(err)
	}
	if err := n.fsys.store.RemoveNamespaceDir(from); err != nil {
		return n.fsys.toErrno(err)
	}
	n.touch()
	np.touch()
	return 0
}

func (n *nsNode) renameDataset(ctx context.Context, d *cache.Dataset, np *nsNode, newName, to string, flags uint32) syscall.Errno {
	r, err := n.fsys.router.Route(to, true)
	if err != nil {
		// The new name is not a dataset name under datasets.match.
		n.fsys.log.Warn("refused renaming a dataset to a name that is not a dataset", "dataset", d.Name(), "to", "/"+to)
		return syscall.EPERM
	}
	if _, ok := np.nsChild(newName); ok {
		return syscall.EEXIST
	}
	if old := np.anchoredDataset(to, true); old != nil && old != d {
		// rename(2) may replace an empty directory; a dataset that holds
		// files or is complete is never replaced.
		if flags&unix.RENAME_NOREPLACE != 0 {
			return syscall.EEXIST
		}
		if err := n.fsys.store.Remove(old); err != nil {
			return n.fsys.toErrno(err)
		}
		n.fsys.dirs.drop(old.Name())
	}
	if err := n.fsys.rename(ctx, d, r); err != nil {
		return n.fsys.toErrno(err)
	}
	n.touch()
	np.touch()
	return 0
}
