package fs

import (
	"context"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
	"golang.org/x/sys/unix"
)

// The helpers below create and remove cache entries for both node kinds: a
// flat dataset's files sit under a namespace node, all others under a
// dataset node, but the cache side is the same.

// entryNode returns the node for the existing cache entry e, which belongs
// to dataset d, as a child of parent.
func (f *FS) entryNode(ctx context.Context, parent *gofs.Inode, d *cache.Dataset, e entry, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	var st syscall.Stat_t
	if err := e.lstat(&st); err != nil {
		return nil, f.toErrno(err)
	}
	out.Attr.FromStat(&st)
	cacheLong(d.Writable(), out)
	return parent.NewInode(ctx, &dsNode{fsys: f, ds: d}, stableOf(d, &st)), 0
}

// immutableTimeout is how long the kernel may keep names and attributes of
// a complete dataset: they no longer change, and a dataset that leaves the
// cache or is restored anew is invalidated explicitly (Forget, Appeared).
// Reading a checkpoint back, after a restart say, then costs no lookups
// beyond the first.
const immutableTimeout = time.Hour

// cacheLong lets the kernel keep entry out of a complete dataset (not
// writable) for immutableTimeout rather than the mount's timeouts.
func cacheLong(writable bool, out *fuse.EntryOut) {
	if !writable {
		out.SetEntryTimeout(immutableTimeout)
		out.SetAttrTimeout(immutableTimeout)
	}
}

// create creates and opens the cache file rel of dataset d as a child of
// parent.
// fresh says no other node holds the file: this create makes it.
func (f *FS) create(ctx context.Context, parent *gofs.Inode, d *cache.Dataset, rel string, fresh bool, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if err := d.OpenWrite(); err != nil {
		return nil, nil, 0, f.toErrno(err)
	}
	fd, err := f.openBeneath(d, rel, int(flags&^syscall.O_APPEND)|syscall.O_CREAT, mode)
	if err != nil {
		d.CloseWrite("", 0, false)
		return nil, nil, 0, f.toErrno(err)
	}
	if uid, gid, ok := f.callerOwner(ctx); ok {
		syscall.Fchown(fd, uid, gid)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		d.CloseWrite("", 0, false)
		return nil, nil, 0, f.toErrno(err)
	}
	out.Attr.FromStat(&st)
	node := &dsNode{fsys: f, ds: d}
	ch := parent.NewInode(ctx, node, stableOf(d, &st))
	if n, ok := ch.Operations().(*dsNode); ok {
		node = n // the inode was known already (a hard link)
	}
	if flags&syscall.O_TRUNC != 0 {
		node.truncated(0) // a copy another node's create showed here
	}
	h, errno := f.newHandle(node, fd, true, true, node.openMode(fresh))
	if errno != 0 {
		return nil, nil, 0, errno
	}
	f.metrics.created.Inc()
	return ch, h, h.openFlags(flags), 0
}

// mknod creates a non-opened entry e (rel inside d).
func (f *FS) mknod(ctx context.Context, parent *gofs.Inode, d *cache.Dataset, e entry, rel string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !d.Writable() {
		return nil, syscall.EROFS
	}
	if err := unix.Mknodat(e.dir, e.name, mode, int(rdev)); err != nil {
		return nil, f.toErrno(err)
	}
	f.preserveOwner(ctx, e)
	if mode&syscall.S_IFMT == syscall.S_IFREG {
		d.AddUsage(1, 0)
	}
	d.EntryAppeared(rel)
	return f.entryNode(ctx, parent, d, e, out)
}

// symlink creates a symbolic link e (rel inside d).
func (f *FS) symlink(ctx context.Context, parent *gofs.Inode, d *cache.Dataset, e entry, rel, target string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !d.Writable() {
		return nil, syscall.EROFS
	}
	if err := unix.Symlinkat(target, e.dir, e.name); err != nil {
		return nil, f.toErrno(err)
	}
	f.preserveOwner(ctx, e)
	d.EntryAppeared(rel)
	return f.entryNode(ctx, parent, d, e, out)
}

// link hard-links target's cache entry at e (rel inside target's dataset).
func (f *FS) link(ctx context.Context, parent *gofs.Inode, target *dsNode, e entry, rel string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !target.ds.Writable() {
		return nil, syscall.EROFS
	}
	te, errno := target.at()
	if errno != 0 {
		return nil, errno
	}
	defer te.release()
	if err := unix.Linkat(te.dir, te.name, e.dir, e.name, 0); err != nil {
		return nil, f.toErrno(err)
	}
	target.ds.EntryAppeared(rel)
	return f.entryNode(ctx, parent, target.ds, e, out)
}

// unlink removes the cache entry e of dataset d and its bytes from d's tally.
func (f *FS) unlink(d *cache.Dataset, e entry) syscall.Errno {
	if !d.Writable() {
		return syscall.EROFS
	}
	var st syscall.Stat_t
	if err := e.lstat(&st); err != nil {
		return f.toErrno(err)
	}
	if err := unix.Unlinkat(e.dir, e.name, 0); err != nil {
		return f.toErrno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Nlink == 1 {
		d.AddUsage(-1, -st.Size)
	}
	return 0
}

// attrSetter applies a SETATTR to one cache entry, by path or through a
// descriptor. Truncation comes before times, so an explicit mtime survives
// it. (chmod and chown arrive as separate requests from chmod(1) and
// chown(1); a request carrying both is applied mode first, as go-fuse's
// loopback does.)
type attrSetter struct {
	chmod    func(mode uint32) error
	chown    func(uid, gid int) error
	truncate func(size int64) error
	utimens  func(ts []unix.Timespec) error
}

func (a attrSetter) apply(in *fuse.SetAttrIn) error {
	if m, ok := in.GetMode(); ok {
		if err := a.chmod(m); err != nil {
			return err
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		u, g := -1, -1 // -1 leaves that id unchanged
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		if err := a.chown(u, g); err != nil {
			return err
		}
	}
	if sz, ok := in.GetSize(); ok {
		if err := a.truncate(int64(sz)); err != nil {
			return err
		}
	}
	return setTimes(a.utimens, in)
}

// setattr applies a SETATTR without an open handle to entry e, never
// following a symlink (the caller refuses a mode change of one).
func (e entry) setattr(in *fuse.SetAttrIn) error {
	return attrSetter{
		chmod: func(m uint32) error { return unix.Fchmodat(e.dir, e.name, m, 0) },
		chown: func(u, g int) error { return unix.Fchownat(e.dir, e.name, u, g, unix.AT_SYMLINK_NOFOLLOW) },
		truncate: func(n int64) error {
			fd, err := e.open(syscall.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer syscall.Close(fd)
			return syscall.Ftruncate(fd, n)
		},
		utimens: func(ts []unix.Timespec) error {
			return unix.UtimesNanoAt(e.dir, e.name, ts, unix.AT_SYMLINK_NOFOLLOW)
		},
	}.apply(in)
}

// setTimes applies the atime and mtime of a SETATTR, leaving the one not
// given unchanged (UTIME_OMIT) and honouring "now".
func setTimes(apply func([]unix.Timespec) error, in *fuse.SetAttrIn) error {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	set := false
	if in.Valid&fuse.FATTR_ATIME != 0 {
		ts[0], set = timespecOf(in.Valid&fuse.FATTR_ATIME_NOW != 0, in.Atime, in.Atimensec), true
	}
	if in.Valid&fuse.FATTR_MTIME != 0 {
		ts[1], set = timespecOf(in.Valid&fuse.FATTR_MTIME_NOW != 0, in.Mtime, in.Mtimensec), true
	}
	if !set {
		return nil
	}
	return apply(ts)
}

func timespecOf(now bool, sec uint64, nsec uint32) unix.Timespec {
	if now {
		return unix.Timespec{Nsec: unix.UTIME_NOW}
	}
	return unix.NsecToTimespec(time.Unix(int64(sec), int64(nsec)).UnixNano())
}
