package fs

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/cache"
	"golang.org/x/sys/unix"
)

// Options configure an FS.
type Options struct {
	Store *cache.Store
	// Job is asked before a dataset starts or is renamed; nil: a mount
	// with no job to ask.
	Job Job
	// Namespace makes every complete, recorded dataset show what every
	// node of the job wrote; nil: every node shows only its own files.
	Namespace Namespace
	// Arrivals shows the checkpoint a restart fetches from the prefix
	// before its bytes are here; nil: it appears once fetched.
	Arrivals   Arrivals
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: no metrics exported
	// EntryTimeout, AttrTimeout and NegativeTimeout are how long the
	// kernel may keep the names, attributes and absences the tree answers
	// with, while they may still change (complete datasets' are kept
	// longer: immutableTimeout).
	EntryTimeout, AttrTimeout, NegativeTimeout time.Duration
}

// FS is one mounted scrfs file system: the per-mount state every node
// shares.
type FS struct {
	store       *cache.Store
	router      *cache.Router
	log         *slog.Logger
	metrics     *metrics
	passthrough atomic.Bool // SetPassthrough, while the tree serves
	owner       owner       // of namespace directories
	root        *nsNode
	unknownErrs sync.Map // error texts already logged by toErrno
	dirs        dirCache
	job         Job
	ns          Namespace // nil: every node shows only its own files
	arrivals    Arrivals  // nil: no dataset is shown before it is fetched

	// server is set once mounted (Mounted), while the tree serves: only
	// then can nodes notify the kernel.
	server atomic.Pointer[fuse.Server]
	// Kernel cache timeouts (Options).
	entryTimeout, attrTimeout, negativeTimeout time.Duration
}

// owner is who namespace directories belong to: the daemon's user.
type owner struct{ uid, gid uint32 }

// New returns an FS serving the datasets of opts.Store.
func New(opts Options) *FS {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f := &FS{
		store:           opts.Store,
		router:          opts.Store.Router(),
		log:             opts.Logger,
		metrics:         newMetrics(opts.Registerer),
		owner:           owner{uint32(os.Getuid()), uint32(os.Getgid())},
		job:             opts.Job,
		ns:              opts.Namespace,
		arrivals:        opts.Arrivals,
		entryTimeout:    opts.EntryTimeout,
		attrTimeout:     opts.AttrTimeout,
		negativeTimeout: opts.NegativeTimeout,
	}
	if f.job == nil {
		f.job = alone{}
	}
	f.root = f.newNSNode(0o755)
	opts.Store.Listen(f.hear)
	return f
}

// Root returns the root of the node tree, to mount (see package
// fs/mount).
func (f *FS) Root() gofs.InodeEmbedder { return f.root }

// NodeOptions returns the go-fuse options of the node tree, mounted or
// not; a mount fills in their MountOptions.
func (f *FS) NodeOptions() *gofs.Options {
	entry, attr, negative := f.entryTimeout, f.attrTimeout, f.negativeTimeout
	return &gofs.Options{
		// Modes as stored: a file chmod'ed to 0000 must read 0000, and
		// with allow_other the kernel then refuses other users.
		NullPermissions: true,
		// The root's inode number, as stat and its "." and ".." show it.
		RootStableAttr:  &gofs.StableAttr{Ino: rootIno},
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &negative,
		Logger:          slog.NewLogLogger(f.log.Handler(), slog.LevelWarn),
	}
}

// Mounted hands the FS the server that serves it: from then on it tells
// the kernel of datasets that come and go behind its back (forget,
// appeared).
func (f *FS) Mounted(server *fuse.Server) { f.server.Store(server) }

// SetPassthrough says whether opens hand the kernel the cache file's
// descriptor, so that reads and writes bypass the daemon; the mount
// decides from what the kernel offers.
func (f *FS) SetPassthrough(on bool) { f.passthrough.Store(on) }

// rootIno is the mount root's inode number, FUSE's root node id. Cache
// entries keep their cache inode numbers, and a cache directory below
// <base>/<user> is never its file system's root (inode 1 on tmpfs).
const rootIno = 1

// OnAdd runs when go-fuse attaches the root; only then can children be
// added, so the namespace is restored here.
func (n *nsNode) OnAdd(ctx context.Context) {
	if n == n.fsys.root {
		n.fsys.restoreNamespace(ctx)
	}
}

// restoreNamespace recreates the plain directories of the mount the store
// remembers, and those above every dataset, after a restart.
func (f *FS) restoreNamespace(ctx context.Context) {
	for p, mode := range f.store.NamespaceDirs() {
		n := f.ensureNS(ctx, p)
		n.mu.Lock()
		n.mode = mode
		n.mu.Unlock()
	}
	for _, d := range f.store.Datasets() {
		r := d.Route()
		if r.Kind == cache.KindDir {
			f.ensureNS(ctx, parentOf(r.Root))
		} else {
			f.ensureNS(ctx, r.Root)
		}
	}
}

// Close unregisters the FS's metrics.
func (f *FS) Close(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, c := range f.metrics.all {
		reg.Unregister(c)
	}
}

// statfs reports the cache file system, so df on the mount shows the space
// checkpoints really have.
func (f *FS) statfs(out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(f.store.CacheDir(), &st); err != nil {
		return f.toErrno(err)
	}
	out.FromStatfsT(&st)
	return 0
}

// setattrCached lets the kernel keep the attributes a SETATTR answers with
// for the mount's attribute timeout, as it keeps a GETATTR's: go-fuse
// leaves them at 0, so every chmod, chown, utimens or truncate would
// otherwise cost a GETATTR at the next stat (or open, or write) of the
// file. They are the entry's attributes read after the change.
func (f *FS) setattrCached(out *fuse.AttrOut) {
	if out.Timeout() == 0 {
		out.SetTimeout(f.attrTimeout)
	}
}

// stableOf identifies a cache entry of dataset d to go-fuse: its inode
// number, so hard links share one node, and d's id as the generation. A
// directory or file deleted with its dataset frees its inode number, which
// the cache's file system gives to the next one made; without the
// generation, go-fuse handed the new dataset's directory the node of the
// gone one while the kernel still referred to it, bound to the removed
// dataset (a mkdir in a new checkpoint failed with EROFS). Namespace
// directories use go-fuse's automatic numbers, which start at 2^63 and
// cannot collide.
func stableOf(d *cache.Dataset, st *syscall.Stat_t) gofs.StableAttr {
	return gofs.StableAttr{Mode: st.Mode & syscall.S_IFMT, Ino: st.Ino, Gen: d.ID()}
}

// callerOwner returns the caller's uid and gid when a new cache entry
// should belong to them: when the daemon runs as root, as a local file
// system would give it to the caller.
func (f *FS) callerOwner(ctx context.Context) (uid, gid int, ok bool) {
	if f.owner.uid != 0 { // the daemon's user, read once (os.Getuid is a system call)
		return 0, 0, false
	}
	caller, ok := fuse.FromContext(ctx)
	if !ok || (caller.Uid == 0 && caller.Gid == 0) {
		return 0, 0, false
	}
	return int(caller.Uid), int(caller.Gid), true
}

// preserveOwner gives new cache entry e to the calling user (see
// callerOwner).
func (f *FS) preserveOwner(ctx context.Context, e entry) {
	if uid, gid, ok := f.callerOwner(ctx); ok {
		unix.Fchownat(e.dir, e.name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	}
}
