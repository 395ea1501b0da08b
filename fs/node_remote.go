package fs

import (
	"context"
	"path"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/record"
)

// Namespace is the job-wide view of complete datasets: what every node
// wrote (from the dataset's record), and the bytes of any file another node
// holds, fetched as they are read. *namespace.Namespace implements it.
type Namespace interface {
	View(dataset string) *record.View
	// Open returns the path of a whole local copy of e, or its copy in
	// the read cache, whole or being fetched.
	Open(ctx context.Context, dataset string, e *record.Entry) (string, RemoteFile, error)
}

// RemoteFile is the copy of a file another node holds, in the read cache,
// as it is being fetched (*namespace.Remote).
type RemoteFile interface {
	// Await waits until the n bytes at off (fewer at the end of the file)
	// are in the file behind Fd, and returns how many there are.
	Await(ctx context.Context, off int64, n int) (int, error)
	Fd() uintptr
	// Whole reports whether every byte of the file is there.
	Whole() bool
	// Close ends one open of it.
	Close()
}

// remoteNode is an entry of a complete dataset that this node's cache
// directory of it does not have: a file, symlink or directory another node
// wrote (or one this node holds for a node gone from the job). Its
// attributes come from the dataset's record; its bytes are fetched into the
// read cache as they are read (namespace.Remote) and served from there.
// Nothing under it can change.
type remoteNode struct {
	gofs.Inode
	fsys *FS
	src  source
	rel  string // path inside the dataset

	opens // the kernel's I/O mode of this file's opens (remote_file.go)
}

// view returns the job-wide view of dataset d, or nil while d is being
// written or not yet recorded (only this node's files are shown then).
func (f *FS) view(d *cache.Dataset) *record.View {
	if f.ns == nil || d.Writable() {
		return nil
	}
	return f.ns.View(d.Name())
}

// sharedFile reports whether entry rel of dataset d is a file several
// nodes wrote, which is read as one through the namespace even where this
// node holds part of it.
func (f *FS) sharedFile(d *cache.Dataset, rel string) bool {
	v := f.view(d)
	if v == nil {
		return false
	}
	e, ok := v.Lookup(rel)
	return ok && e.Shared()
}

// recorded drops from the node tree and the kernel's caches the files of a
// dataset just recorded that several nodes wrote: where this node wrote a
// part, the name showed that part; the next lookup finds the file as one
// (sharedFile).
func (f *FS) recorded(info cache.Info) {
	d := f.store.Get(info.Name)
	if d == nil {
		return
	}
	v := f.view(d)
	if v == nil || v.SharedFiles() == 0 {
		return
	}
	for _, e := range v.SharedEntries() {
		f.entryChanged(info, e.Path) // a name this node never showed costs nothing
	}
}

// source is what a remoteNode shows: a complete dataset's job-wide view
// through the namespace, or a dataset arriving from the prefix.
type source interface {
	view() *record.View
	open(ctx context.Context, e *record.Entry) (string, RemoteFile, error)
	dataset() *cache.Dataset // nil for an arrival
	writable() bool
	// cached says whether reads of a copy still being filled may go
	// through the kernel's page cache (see remoteNode.Open).
	cached() bool
}

// dsSource is a dataset of the cache and the namespace's view of it.
type dsSource struct {
	f *FS
	d *cache.Dataset
}

func (s dsSource) view() *record.View { return s.f.view(s.d) }
func (s dsSource) open(ctx context.Context, e *record.Entry) (string, RemoteFile, error) {
	return s.f.ns.Open(ctx, s.d.Name(), e)
}
func (s dsSource) dataset() *cache.Dataset { return s.d }
func (s dsSource) writable() bool          { return s.d.Writable() }
func (s dsSource) cached() bool            { return false }

// arrivalSource is a dataset being fetched at the start.
type arrivalSource struct{ a Arrival }

func (s arrivalSource) view() *record.View { return s.a.View() }
func (s arrivalSource) open(ctx context.Context, e *record.Entry) (string, RemoteFile, error) {
	r, err := s.a.Open(ctx, e)
	return "", r, err
}
func (s arrivalSource) dataset() *cache.Dataset { return nil }
func (s arrivalSource) writable() bool          { return false }
func (s arrivalSource) cached() bool            { return true }

// remoteChild returns the node of entry rel of src that this node's cache
// directory lacks, as a child of parent, or ENOENT.
func (f *FS) remoteChild(ctx context.Context, parent *gofs.Inode, src source, rel string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	v := src.view()
	if v == nil {
		if !src.writable() {
			// Complete but not yet recorded here: the names other nodes
			// wrote appear with the record, so "no such file" must not be
			// remembered by the kernel until then.
			out.SetEntryTimeout(time.Nanosecond)
		}
		return nil, syscall.ENOENT
	}
	e, ok := v.Lookup(rel)
	if !ok {
		return nil, syscall.ENOENT
	}
	fillRemote(e, &out.Attr)
	cacheLong(src.writable(), out)
	n := &remoteNode{fsys: f, src: src, rel: e.Path}
	return parent.NewInode(ctx, n, gofs.StableAttr{Mode: typeBits(e.Meta.Type)}), 0
}

// remoteEntries lists the entries of directory rel of src that other
// nodes wrote and have names not in local.
func (f *FS) remoteEntries(src source, rel string, local map[string]bool) []fuse.DirEntry {
	v := src.view()
	if v == nil {
		return nil
	}
	var out []fuse.DirEntry
	for _, e := range v.ReadDir(rel) {
		if name := path.Base(e.Path); !local[name] {
			out = append(out, fuse.DirEntry{Name: name, Mode: typeBits(e.Meta.Type)})
		}
	}
	return out
}

// withRemote lists directory rel of complete dataset d: what local lists
// (this node's cache directory), then the entries only other nodes wrote.
func (f *FS) withRemote(local gofs.DirStream, d *cache.Dataset, rel string) (gofs.DirStream, syscall.Errno) {
	defer local.Close()
	var entries []fuse.DirEntry
	names := map[string]bool{}
	for local.HasNext() {
		e, errno := local.Next()
		if errno != 0 {
			return nil, errno
		}
		entries = append(entries, e)
		names[e.Name] = true
	}
	return gofs.NewListDirStream(append(entries, f.remoteEntries(dsSource{f, d}, rel, names)...)), 0
}

// entry returns the node's current entry in its dataset's view.
func (n *remoteNode) entry() (*record.Entry, syscall.Errno) {
	v := n.src.view()
	if v == nil {
		return nil, syscall.ENOENT
	}
	e, ok := v.Lookup(n.rel)
	if !ok {
		return nil, syscall.ENOENT
	}
	return e, 0
}

// Getattr reports the attributes the writer gave the entry.
func (n *remoteNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.observe(opGetattr, time.Now(), &errno)
	e, errno := n.entry()
	if errno != 0 {
		return errno
	}
	fillRemote(e, &out.Attr)
	out.SetTimeout(immutableTimeout)
	return 0
}

// Lookup finds an entry of a directory only other nodes wrote.
func (n *remoteNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opLookup, time.Now(), &errno)
	return n.fsys.remoteChild(ctx, n.EmbeddedInode(), n.src, path.Join(n.rel, name), out)
}

// Readdir lists a directory only other nodes wrote.
func (n *remoteNode) Readdir(ctx context.Context) (ds gofs.DirStream, errno syscall.Errno) {
	defer n.fsys.observe(opReaddir, time.Now(), &errno)
	parent := n.StableAttr().Ino
	if _, p := n.Parent(); p != nil {
		parent = p.StableAttr().Ino
	}
	entries := []fuse.DirEntry{{Name: ".", Mode: syscall.S_IFDIR, Ino: n.StableAttr().Ino}, {Name: "..", Mode: syscall.S_IFDIR, Ino: parent}}
	entries = append(entries, n.fsys.remoteEntries(n.src, n.rel, nil)...)
	return gofs.NewListDirStream(entries), 0
}

// Readlink returns a symlink's target as its writer made it.
func (n *remoteNode) Readlink(ctx context.Context) (target []byte, errno syscall.Errno) {
	defer n.fsys.observe(opReadlink, time.Now(), &errno)
	e, errno := n.entry()
	if errno != 0 {
		return nil, errno
	}
	if e.Meta.Type != files.Symlink {
		return nil, syscall.EINVAL
	}
	return []byte(e.Meta.Target), 0
}

// Statfs reports the cache file system.
func (n *remoteNode) Statfs(ctx context.Context, out *fuse.StatfsOut) (errno syscall.Errno) {
	defer n.fsys.observe(opStatfs, time.Now(), &errno)
	return n.fsys.statfs(out)
}

// Nothing under a complete dataset changes.

// Setattr fails: the dataset is complete.
func (n *remoteNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// Mkdir fails: the dataset is complete.
func (n *remoteNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

// Create fails: the dataset is complete.
func (n *remoteNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

// Unlink fails: the dataset is complete.
func (n *remoteNode) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

// Rmdir fails: the dataset is complete.
func (n *remoteNode) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

// fillRemote fills out with the attributes of e as its writer left them.
func fillRemote(e *record.Entry, out *fuse.Attr) {
	m := e.Meta
	out.Mode = typeBits(m.Type) | m.Mode&0o7777
	out.Nlink = 1
	out.Size = uint64(m.Size)
	switch m.Type {
	case files.Dir:
		out.Nlink, out.Size = 2, 4096
	case files.Symlink:
		out.Size = uint64(len(m.Target))
	}
	out.Blksize = 4096
	out.Blocks = (out.Size + 511) / 512
	out.Owner = fuse.Owner{Uid: m.UID, Gid: m.GID}
	mtime, atime := time.Unix(0, m.MtimeNs), time.Unix(0, m.AtimeNs)
	out.SetTimes(&atime, &mtime, &mtime)
}

// typeBits returns the S_IF* bits of an entry type (a hard link is the
// regular file it names).
func typeBits(t files.Type) uint32 {
	switch t {
	case files.Dir:
		return syscall.S_IFDIR
	case files.Symlink:
		return syscall.S_IFLNK
	}
	return syscall.S_IFREG
}
