package fs

import (
	"context"
	"errors"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// handle is one open of a dataset file: the cache file's descriptor. go-fuse
// waits for every in-flight operation on a handle before Release, so fd is
// never used after it is closed.
type handle struct {
	fsys    *FS
	node    *dsNode // nil for a copy of another node's file (read-only)
	fd      int     // owned; closed by Release
	write   bool    // counted as a writer of the dataset (OpenWrite)
	created bool    // this open created the file
	size0   int64   // size at open, to measure growth under passthrough
	// passed: the kernel reads and writes the cache file itself
	// (passthrough); counted in node.pt until Release.
	passed bool
	// shared: a writer of a dataset whose files several nodes may write,
	// which tells the dataset what it wrote (written.go): track collects
	// the ranges it writes through the daemon (nil when passed through),
	// stamp0 is its file as it was at open.
	shared bool
	track  *tracker
	stamp0 stamp
}

// newHandle makes the handle of an open of n's cache file fd, passed
// through to the kernel or not (openMode). On failure it closes fd and
// undoes what the open counted.
func (f *FS) newHandle(n *dsNode, fd int, write, created, passed bool) (*handle, syscall.Errno) {
	st, err := stampOf(fd)
	if err != nil {
		syscall.Close(fd)
		n.closed(passed, nil)
		if write {
			n.ds.CloseWrite("", 0, false)
		}
		return nil, f.toErrno(err)
	}
	h := &handle{fsys: f, node: n, fd: fd, write: write, created: created, size0: st.size, passed: passed, stamp0: st}
	if write && f.namesShared(n.ds) {
		h.shared = true
		if !passed {
			h.track = n.tracking()
		}
	}
	return h, 0
}

// openFlags are the FOPEN flags handle h, opened with flags, is answered
// with. On the daemon data path (no passthrough) a write-only
// handle bypasses the kernel's page cache (FOPEN_DIRECT_IO): every write
// reaches the daemon either way (FUSE caches writes through, not back), but
// through the page cache the writer first copies each byte into a page the
// kernel allocates for the FUSE file, and that page then holds a second
// copy of the checkpoint in RAM beside the cache file's own. Direct I/O
// hands the writer's pages to the daemon as they are: 4 × 1 GiB took the
// writers 1.4–1.6 s of CPU through the page cache and 0.3–0.4 s without
// (issue 16). A write-only descriptor can be neither read nor mapped, so
// nothing else changes for the application; handles that can read keep the
// page cache. Under passthrough the kernel writes the cache file itself
// and this does not apply.
func (h *handle) openFlags(flags uint32) uint32 {
	if !h.passed && flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return fuse.FOPEN_DIRECT_IO
	}
	return 0
}

// PassthroughFd offers the cache file to the kernel, which then serves reads
// and writes without the daemon (go-fuse registers it once per inode).
func (h *handle) PassthroughFd() (int, bool) { return h.fd, h.passed }

// Read serves a read from the cache file, spliced to the kernel where a
// pipe can carry the reply (readReply).
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (res fuse.ReadResult, errno syscall.Errno) {
	defer h.fsys.observe(opRead, time.Now(), &errno)
	var st syscall.Stat_t
	if err := syscall.Fstat(h.fd, &st); err != nil {
		return nil, h.fsys.toErrno(err)
	}
	n := min(int64(len(dest)), max(st.Size-off, 0))
	h.fsys.metrics.read.Add(float64(n))
	return h.fsys.readReply(h.fd, dest, off, int(n))
}

// Write writes to the cache file. A full cache device fails the write with
// ENOSPC, as a local file system would; the space is needed, so a failed
// dataset kept in the cache goes (cache.Store.NeedSpace).
func (h *handle) Write(ctx context.Context, data []byte, off int64) (written uint32, errno syscall.Errno) {
	defer h.fsys.observe(opWrite, time.Now(), &errno)
	n, err := syscall.Pwrite(h.fd, data, off)
	if n > 0 {
		h.fsys.metrics.written.Add(float64(n))
		if h.track != nil {
			h.track.wrote(off, int64(n))
		}
	}
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			h.fsys.store.NeedSpace()
		}
		return uint32(max(n, 0)), h.fsys.toErrno(err)
	}
	return uint32(n), 0
}

// Flush answers ENOSYS once, after which the kernel stops sending FLUSH on
// every close(2): nothing is buffered in the daemon, so a flush would only
// cost a round trip. Release still reports every close.
func (h *handle) Flush(ctx context.Context) syscall.Errno { return syscall.ENOSYS }

// Release closes the cache file and tells the dataset a writer is gone,
// with how much the file grew. Under passthrough the kernel wrote the file
// without the daemon, which never saw a write fail: a writer that lets go
// of its file while the cache has no block left got ENOSPC (its last write
// could not be made), and is counted as such, and the space is needed.
func (h *handle) Release(ctx context.Context) (errno syscall.Errno) {
	defer h.fsys.observe(opRelease, time.Now(), &errno)
	defer h.node.closed(h.passed, h.track)
	if h.write && h.passed && h.fsys.store.Full() {
		h.fsys.metrics.errors.WithLabelValues(opNames[opWrite], errnoName(syscall.ENOSPC)).Inc()
		h.fsys.store.NeedSpace()
	}
	if h.write {
		var grew int64
		var st syscall.Stat_t
		if syscall.Fstat(h.fd, &st) == nil {
			grew = st.Size - h.size0
		}
		rel, ok := h.node.rel()
		if ok {
			h.tell(rel) // before CloseWrite, which may complete the dataset
		}
		h.node.ds.CloseWrite(rel, grew, h.created)
	}
	return h.fsys.toErrno(syscall.Close(h.fd))
}

// fsyncFdatasync is FUSE_FSYNC_FDATASYNC of the kernel's fuse.h, which
// go-fuse does not name.
const fsyncFdatasync = 1

func (h *handle) fsync(flags uint32) syscall.Errno {
	if flags&fsyncFdatasync != 0 {
		return h.fsys.toErrno(syscall.Fdatasync(h.fd))
	}
	return h.fsys.toErrno(syscall.Fsync(h.fd))
}

// Fsync syncs the cache file.
func (h *handle) Fsync(ctx context.Context, flags uint32) (errno syscall.Errno) {
	defer h.fsys.observe(opFsync, time.Now(), &errno)
	return h.fsync(flags)
}

func (h *handle) getattr(out *fuse.AttrOut) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Fstat(h.fd, &st); err != nil {
		return h.fsys.toErrno(err)
	}
	out.FromStat(&st)
	return 0
}

// setattr applies a SETATTR through the descriptor (ftruncate and friends).
func (h *handle) setattr(in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	err := attrSetter{
		chmod: func(m uint32) error { return syscall.Fchmod(h.fd, m) },
		chown: func(u, g int) error { return syscall.Fchown(h.fd, u, g) },
		truncate: func(n int64) error {
			if err := syscall.Ftruncate(h.fd, n); err != nil {
				return err
			}
			h.node.truncated(n)
			return nil
		},
		utimens: func(ts []unix.Timespec) error { return futimens(h.fd, ts) },
	}.apply(in)
	if err != nil {
		return h.fsys.toErrno(err)
	}
	return h.getattr(out)
}

// Allocate preallocates space (fallocate), so a writer that reserves its
// checkpoint's size learns of a full cache before writing.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) (errno syscall.Errno) {
	defer h.fsys.observe(opAllocate, time.Now(), &errno)
	if h.node == nil || !h.node.ds.Writable() { // nil: another node's file
		return syscall.EROFS
	}
	if err := syscall.Fallocate(h.fd, mode, int64(off), int64(size)); err != nil {
		return h.fsys.toErrno(err)
	}
	if h.track != nil && mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE) != 0 {
		h.track.wrote(int64(off), int64(size)) // zeros written
	}
	return 0
}

// Lseek serves SEEK_DATA and SEEK_HOLE, so sparse checkpoints copy sparsely.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (pos uint64, errno syscall.Errno) {
	defer h.fsys.observe(opLseek, time.Now(), &errno)
	n, err := unix.Seek(h.fd, int64(off), int(whence))
	if err != nil {
		return 0, h.fsys.toErrno(err)
	}
	return uint64(n), 0
}

// futimens is utimensat(fd, NULL, ts, 0): set times through a descriptor
// with nanosecond precision, which x/sys/unix does not wrap.
func futimens(fd int, ts []unix.Timespec) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
