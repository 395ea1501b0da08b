package fs

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
	"golang.org/x/sys/unix"
)

// Files and symlinks at the mount root that no dataset claims are pointer
// files (cache/pointers.go): the job's, shown on every node. They live in
// the store's memory; the mount makes each change the job's before it
// shows it (Job.ChangePointers, which tells every node, this one too):
// a create at once (an empty file), then every write and truncation, a
// symlink, an unlink, a rename. So an application's write that the job
// cannot take fails (EIO, EFBIG beyond cache.MaxPointerSize), and once it
// returned every node reads what was written.

// pointerNode is a pointer file at the mount root.
type pointerNode struct {
	gofs.Inode
	fsys *FS
	name string
}

// atRoot reports whether n is the mount root, the only directory that
// holds pointer files.
func (n *nsNode) atRoot() bool { return n == n.fsys.root }

// isPointer reports whether name at the mount root is a pointer file's
// name: a file or symlink there that no dataset claims.
func (n *nsNode) isPointer(name string) bool {
	if !n.atRoot() {
		return false
	}
	_, err := n.fsys.router.Route(n.childPath(name), false)
	return errors.Is(err, cache.ErrNoDataset)
}

// changePointers makes a change of the pointer files the job's, and shows
// it here (without a job, here only).
func (f *FS) changePointers(ctx context.Context, set []cache.Pointer, remove []string) error {
	if _, jobless := f.job.(alone); jobless {
		if err := f.store.ChangePointers(set, remove, f.store.NewestDataset()); err != nil {
			return err
		}
		for _, p := range set {
			f.store.PointerChanged(p.Name)
		}
		for _, name := range remove {
			f.store.PointerChanged(name)
		}
		return nil
	}
	return f.job.ChangePointers(ctx, set, remove)
}

// pointerChild returns the node of pointer file name, or ENOENT.
func (n *nsNode) pointerChild(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	p, ok := n.fsys.store.Pointer(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	fillPointer(&p, &out.Attr)
	// Another node may change it at any moment: the kernel keeps nothing
	// of it (its opens are direct I/O).
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	if ch := n.GetChild(name); ch != nil && ch.StableAttr().Mode == pointerMode(&p) {
		if _, ok := ch.Operations().(*pointerNode); ok {
			return ch, 0
		}
	}
	return n.NewInode(ctx, &pointerNode{fsys: n.fsys, name: name}, gofs.StableAttr{Mode: pointerMode(&p)}), 0
}

// pointerEntries lists the pointer files, for the root's listing.
func (f *FS) pointerEntries() []fuse.DirEntry {
	var out []fuse.DirEntry
	for _, p := range f.store.Pointers() {
		out = append(out, fuse.DirEntry{Name: p.Name, Mode: pointerMode(&p)})
	}
	return out
}

func pointerMode(p *cache.Pointer) uint32 {
	if p.Type == cache.PointerLink {
		return syscall.S_IFLNK
	}
	return syscall.S_IFREG
}

func fillPointer(p *cache.Pointer, out *fuse.Attr) {
	out.Mode = pointerMode(p) | p.Mode&0o7777
	out.Nlink = 1
	out.Size = uint64(len(p.Data))
	if p.Type == cache.PointerLink {
		out.Size = uint64(len(p.Target))
	}
	out.Blksize = 4096
	out.Blocks = (out.Size + 511) / 512
	out.Owner = fuse.Owner{Uid: p.UID, Gid: p.GID}
	t := time.Unix(0, p.MtimeNs)
	out.SetTimes(&t, &t, &t)
}

// newPointer returns a pointer file called name made now by the caller of
// ctx.
func (f *FS) newPointer(ctx context.Context, name string, mode uint32) cache.Pointer {
	p := cache.Pointer{Name: name, Type: cache.PointerFile, Mode: mode & 0o7777, UID: f.owner.uid, GID: f.owner.gid,
		MtimeNs: time.Now().UnixNano()}
	if caller, ok := fuse.FromContext(ctx); ok && f.owner.uid == 0 {
		p.UID, p.GID = caller.Uid, caller.Gid
	}
	return p
}

// createPointer makes pointer file name, empty, and opens it for writing.
func (n *nsNode) createPointer(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	f := n.fsys
	p := f.newPointer(ctx, name, mode)
	if old, ok := f.store.Pointer(name); ok {
		if flags&syscall.O_EXCL != 0 {
			return nil, nil, 0, syscall.EEXIST
		}
		p = old
		if flags&syscall.O_TRUNC != 0 {
			p.Data, p.MtimeNs = nil, time.Now().UnixNano()
		}
	}
	if err := f.changePointers(ctx, []cache.Pointer{p}, nil); err != nil {
		return nil, nil, 0, f.toErrno(err)
	}
	n.touch()
	fillPointer(&p, &out.Attr)
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	pn := &pointerNode{fsys: f, name: name}
	ch := n.NewInode(ctx, pn, gofs.StableAttr{Mode: syscall.S_IFREG})
	return ch, &pointerHandle{node: pn, data: p.Data, write: true}, fuse.FOPEN_DIRECT_IO, 0
}

// symlinkPointer makes a symlink pointer file.
func (n *nsNode) symlinkPointer(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	f := n.fsys
	if _, ok := f.store.Pointer(name); ok {
		return nil, syscall.EEXIST
	}
	p := f.newPointer(ctx, name, 0o777)
	p.Type, p.Target = cache.PointerLink, target
	if err := f.changePointers(ctx, []cache.Pointer{p}, nil); err != nil {
		return nil, f.toErrno(err)
	}
	n.touch()
	return n.pointerChild(ctx, name, out)
}

// unlinkPointer removes a pointer file.
func (n *nsNode) unlinkPointer(ctx context.Context, name string) syscall.Errno {
	if _, ok := n.fsys.store.Pointer(name); !ok {
		return syscall.ENOENT
	}
	if err := n.fsys.changePointers(ctx, nil, []string{name}); err != nil {
		return n.fsys.toErrno(err)
	}
	n.touch()
	return 0
}

// renamePointer renames pointer file from to to (both at the root), as a
// framework moves a pointer it wrote under a temporary name into place.
func (n *nsNode) renamePointer(ctx context.Context, from, to string, flags uint32) syscall.Errno {
	p, ok := n.fsys.store.Pointer(from)
	if !ok {
		return syscall.ENOENT
	}
	if _, exists := n.fsys.store.Pointer(to); exists && flags&unix.RENAME_NOREPLACE != 0 {
		return syscall.EEXIST
	}
	p.Name = to
	if err := n.fsys.changePointers(ctx, []cache.Pointer{p}, []string{from}); err != nil {
		return n.fsys.toErrno(err)
	}
	n.touch()
	return 0
}

// pointer returns the node's pointer file as the store shows it now.
func (n *pointerNode) pointer() (cache.Pointer, syscall.Errno) {
	p, ok := n.fsys.store.Pointer(n.name)
	if !ok {
		return p, syscall.ENOENT
	}
	return p, 0
}

// Getattr reports the pointer file's attributes.
func (n *pointerNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.observe(opGetattr, time.Now(), &errno)
	p, errno := n.pointer()
	if errno != 0 {
		return errno
	}
	fillPointer(&p, &out.Attr)
	out.SetTimeout(0)
	return 0
}

// Readlink returns a symlink pointer's target.
func (n *pointerNode) Readlink(ctx context.Context) (target []byte, errno syscall.Errno) {
	defer n.fsys.observe(opReadlink, time.Now(), &errno)
	p, errno := n.pointer()
	if errno != 0 {
		return nil, errno
	}
	if p.Type != cache.PointerLink {
		return nil, syscall.EINVAL
	}
	return []byte(p.Target), 0
}

// Open opens a pointer file: its bytes as they are now, for reading, or
// to change them (each write is the job's before it returns).
func (n *pointerNode) Open(ctx context.Context, flags uint32) (fh gofs.FileHandle, fuseFlags uint32, errno syscall.Errno) {
	defer n.fsys.observe(opOpen, time.Now(), &errno)
	p, errno := n.pointer()
	if errno != 0 {
		return nil, 0, errno
	}
	h := &pointerHandle{node: n, data: p.Data, write: flags&syscall.O_ACCMODE != syscall.O_RDONLY}
	if flags&syscall.O_TRUNC != 0 && h.write {
		if errno := h.publish(ctx, nil); errno != 0 {
			return nil, 0, errno
		}
	}
	return h, fuse.FOPEN_DIRECT_IO, 0
}

// Setattr changes a pointer file's mode, owner, times or size.
func (n *pointerNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.observe(opSetattr, time.Now(), &errno)
	p, errno := n.pointer()
	if errno != 0 {
		return errno
	}
	if m, ok := in.GetMode(); ok {
		p.Mode = m & 0o7777
	}
	if uid, ok := in.GetUID(); ok {
		p.UID = uid
	}
	if gid, ok := in.GetGID(); ok {
		p.GID = gid
	}
	if mt, ok := in.GetMTime(); ok {
		p.MtimeNs = mt.UnixNano()
	}
	if size, ok := in.GetSize(); ok {
		if size > cache.MaxPointerSize {
			return syscall.EFBIG
		}
		p.Data = resized(p.Data, int(size))
		p.MtimeNs = time.Now().UnixNano()
	}
	if err := n.fsys.changePointers(ctx, []cache.Pointer{p}, nil); err != nil {
		return n.fsys.toErrno(err)
	}
	if h, ok := fh.(*pointerHandle); ok {
		h.mu.Lock()
		h.data = p.Data
		h.mu.Unlock()
	}
	fillPointer(&p, &out.Attr)
	out.SetTimeout(0)
	return 0
}

// resized returns b cut or zero-extended to n bytes, as a new slice.
func resized(b []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, b)
	return out
}

// pointerHandle is one open of a pointer file: the bytes it reads, and
// writes through it, each the job's before it returns.
type pointerHandle struct {
	node  *pointerNode
	write bool

	mu   sync.Mutex
	data []byte
}

// Read serves a read from the bytes the file had at open (or after this
// open's own writes), copied into the request's buffer and handed over as
// a vector, which go-fuse writes to the kernel as it is (see readReply).
func (h *pointerHandle) Read(ctx context.Context, dest []byte, off int64) (res fuse.ReadResult, errno syscall.Errno) {
	defer h.node.fsys.observe(opRead, time.Now(), &errno)
	h.mu.Lock()
	defer h.mu.Unlock()
	var n int
	if off < int64(len(h.data)) {
		n = copy(dest, h.data[off:])
	}
	return fuse.ReadResultVector([][]byte{dest[:n]}), 0
}

// Write changes the file's bytes and makes them the job's.
func (h *pointerHandle) Write(ctx context.Context, b []byte, off int64) (written uint32, errno syscall.Errno) {
	defer h.node.fsys.observe(opWrite, time.Now(), &errno)
	if !h.write {
		return 0, syscall.EBADF
	}
	if off+int64(len(b)) > cache.MaxPointerSize {
		h.node.fsys.log.Warn("a pointer file at the mount root grew past its bound", "name", h.node.name,
			"size", off+int64(len(b)), "bound", cache.MaxPointerSize)
		return 0, syscall.EFBIG
	}
	h.mu.Lock()
	data := resized(h.data, max(len(h.data), int(off)+len(b)))
	h.mu.Unlock()
	copy(data[off:], b)
	if errno := h.publish(ctx, data); errno != 0 {
		return 0, errno
	}
	return uint32(len(b)), 0
}

// publish makes data the file's bytes, the job's.
func (h *pointerHandle) publish(ctx context.Context, data []byte) syscall.Errno {
	p, errno := h.node.pointer()
	if errno != 0 {
		return errno
	}
	p.Data, p.MtimeNs = data, time.Now().UnixNano()
	if err := h.node.fsys.changePointers(ctx, []cache.Pointer{p}, nil); err != nil {
		return h.node.fsys.toErrno(err)
	}
	h.mu.Lock()
	h.data = data
	h.mu.Unlock()
	return 0
}

// Flush has nothing to do: every write was the job's already.
func (h *pointerHandle) Flush(ctx context.Context) syscall.Errno { return syscall.ENOSYS }

// Release ends the open.
func (h *pointerHandle) Release(ctx context.Context) syscall.Errno { return 0 }

// pointerChanged drops pointer file name from the node tree: the job
// changed it (this node's application or another's), perhaps into a
// symlink or out of existence. The kernel keeps nothing of it to drop.
func (f *FS) pointerChanged(name string) {
	if ch := f.root.GetChild(name); ch != nil {
		if _, ok := ch.Operations().(*pointerNode); ok {
			if p, exists := f.store.Pointer(name); !exists || ch.StableAttr().Mode != pointerMode(&p) {
				f.root.RmChild(name)
			}
		}
	}
}
