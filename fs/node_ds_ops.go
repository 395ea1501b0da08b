package fs

import (
	"context"
	"errors"
	"path"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/files"
	"golang.org/x/sys/unix"
)

// Mkdir creates a directory inside a dataset.
func (n *dsNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opMkdir, time.Now(), &errno)
	if errno := n.mutable(name); errno != 0 {
		return nil, errno
	}
	e, rel, errno := n.childAt(name)
	if errno != 0 {
		return nil, errno
	}
	defer e.release()
	// Several ranks may make the same directory at once: one directory,
	// and every mkdir succeeds.
	elsewhere, errno := n.fsys.createName(ctx, n.ds, rel, files.Meta{Type: files.Dir, Mode: mode & 0o7777}, false)
	if errno != 0 {
		return nil, errno
	}
	if err := unix.Mkdirat(e.dir, e.name, mode); err != nil && !(elsewhere && errors.Is(err, syscall.EEXIST)) {
		return nil, n.fsys.toErrno(err)
	}
	n.fsys.preserveOwner(ctx, e)
	return n.fsys.entryNode(ctx, n.EmbeddedInode(), n.ds, e, out)
}

// Rmdir removes a directory inside a dataset.
func (n *dsNode) Rmdir(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.fsys.observe(opRmdir, time.Now(), &errno)
	if errno := n.mutable(name); errno != 0 {
		return errno
	}
	e, rel, errno := n.childAt(name)
	if errno != 0 {
		return errno
	}
	defer e.release()
	if errno := n.fsys.removeName(ctx, n.ds, rel, true); errno != 0 {
		return errno
	}
	if err := unix.Unlinkat(e.dir, e.name, unix.AT_REMOVEDIR); err != nil {
		return n.fsys.toErrno(err)
	}
	n.fsys.dirs.renamed(n.ds)
	return 0
}

// Create creates and opens a file inside a dataset.
func (n *dsNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (ch *gofs.Inode, fh gofs.FileHandle, fuseFlags uint32, errno syscall.Errno) {
	defer n.fsys.observe(opCreate, time.Now(), &errno)
	if n.hidden(name) {
		return nil, nil, 0, syscall.EPERM
	}
	r, ok := n.rel()
	if !ok {
		return nil, nil, 0, syscall.ENOENT
	}
	rel := path.Join(r, name)
	joined, errno := n.fsys.createName(ctx, n.ds, rel, files.Meta{Type: files.Regular, Mode: mode & 0o7777}, flags&syscall.O_EXCL != 0)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if joined { // another node made it first: this copy holds what is written here, if anything
		n.ds.Placeholder(rel)
	}
	return n.fsys.create(ctx, n.EmbeddedInode(), n.ds, rel, !joined, flags, mode, out)
}

// Mknod creates a special file (or a regular file without opening it).
func (n *dsNode) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opMknod, time.Now(), &errno)
	if errno := n.mutable(name); errno != 0 {
		return nil, errno
	}
	e, rel, errno := n.childAt(name)
	if errno != 0 {
		return nil, errno
	}
	defer e.release()
	if mode&syscall.S_IFMT == syscall.S_IFREG {
		if _, errno := n.fsys.createName(ctx, n.ds, rel, files.Meta{Type: files.Regular, Mode: mode & 0o7777}, true); errno != 0 {
			return nil, errno
		}
	}
	return n.fsys.mknod(ctx, n.EmbeddedInode(), n.ds, e, rel, mode, rdev, out)
}

// Symlink creates a symbolic link inside a dataset.
func (n *dsNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opSymlink, time.Now(), &errno)
	if errno := n.mutable(name); errno != 0 {
		return nil, errno
	}
	e, rel, errno := n.childAt(name)
	if errno != 0 {
		return nil, errno
	}
	defer e.release()
	if _, errno := n.fsys.createName(ctx, n.ds, rel, files.Meta{Type: files.Symlink, Mode: 0o777, Target: target}, true); errno != 0 {
		return nil, errno
	}
	return n.fsys.symlink(ctx, n.EmbeddedInode(), n.ds, e, rel, target, out)
}

// Link makes a hard link to a file of the same dataset.
func (n *dsNode) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opLink, time.Now(), &errno)
	t, ok := target.(*dsNode)
	if !ok || t.ds != n.ds {
		return nil, syscall.EXDEV
	}
	if errno := n.mutable(name); errno != 0 {
		return nil, errno
	}
	e, rel, errno := n.childAt(name)
	if errno != 0 {
		return nil, errno
	}
	defer e.release()
	if _, errno := n.fsys.createName(ctx, n.ds, rel, files.Meta{Type: files.Regular, Mode: 0o644}, true); errno != 0 {
		return nil, errno
	}
	return n.fsys.link(ctx, n.EmbeddedInode(), t, e, rel, out)
}

// Unlink removes a file inside a dataset.
func (n *dsNode) Unlink(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.fsys.observe(opUnlink, time.Now(), &errno)
	if n.hidden(name) {
		return syscall.ENOENT
	}
	e, rel, errno := n.childAt(name)
	if errno != 0 {
		return errno
	}
	defer e.release()
	if errno := n.fsys.removeName(ctx, n.ds, rel, false); errno != 0 {
		return errno
	}
	if errno := n.fsys.unlink(n.ds, e); errno != 0 {
		return errno
	}
	n.ds.EntryRemoved(rel)
	return 0
}

// Rename moves an entry within its dataset; between datasets it is EXDEV.
func (n *dsNode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) (errno syscall.Errno) {
	defer n.fsys.observe(opRename, time.Now(), &errno)
	np, ok := newParent.(*dsNode)
	if !ok || np.ds != n.ds {
		return syscall.EXDEV
	}
	if n.hidden(name) || np.hidden(newName) {
		return syscall.EPERM
	}
	if errno := n.writable(); errno != 0 {
		return errno
	}
	from, fromRel, errno := n.childAt(name)
	if errno != 0 {
		return errno
	}
	defer from.release()
	to, rel, errno := np.childAt(newName)
	if errno != 0 {
		return errno
	}
	defer to.release()
	if errno := n.renameName(ctx, from, fromRel, rel, flags); errno != 0 {
		return errno
	}
	if err := unix.Renameat2(from.dir, from.name, to.dir, to.name, uint(flags)); err != nil {
		return n.fsys.toErrno(err)
	}
	n.ds.EntryRenamed(fromRel, rel)
	if ch := n.GetChild(name); ch == nil || ch.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFDIR || flags&unix.RENAME_EXCHANGE != 0 {
		// A directory moved (or may have): paths below it name others now.
		n.fsys.dirs.renamed(n.ds)
	}
	n.ds.EntryAppeared(rel)
	return 0
}

// Open opens a dataset file. Opening for writing (or with O_TRUNC) counts as
// a writer of the dataset and fails with EROFS once it is complete.
func (n *dsNode) Open(ctx context.Context, flags uint32) (fh gofs.FileHandle, fuseFlags uint32, errno syscall.Errno) {
	defer n.fsys.observe(opOpen, time.Now(), &errno)
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
	if write {
		if err := n.ds.OpenWrite(); err != nil {
			return nil, 0, n.fsys.toErrno(err)
		}
	}
	// The kernel keeps the file offset and sends positioned writes, so
	// O_APPEND must not reach the backing descriptor.
	rel, ok := n.rel()
	if !ok {
		return nil, 0, syscall.ENOENT
	}
	passed := n.openMode(false)
	fd, err := n.fsys.openBeneath(n.ds, rel, int(flags&^(syscall.O_APPEND|fuse.FMODE_EXEC)), 0)
	if err != nil {
		n.closed(passed, nil)
		if write {
			n.ds.CloseWrite("", 0, false)
		}
		return nil, 0, n.fsys.toErrno(err)
	}
	if flags&syscall.O_TRUNC != 0 {
		n.truncated(0)
	}
	h, errno := n.fsys.newHandle(n, fd, write, false, passed)
	if errno != 0 {
		return nil, 0, errno
	}
	return h, h.openFlags(flags), 0
}

// mutable checks that name may be created or removed in directory n.
func (n *dsNode) mutable(name string) syscall.Errno {
	if n.hidden(name) {
		return syscall.EPERM
	}
	return n.writable()
}
