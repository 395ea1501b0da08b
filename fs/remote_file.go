package fs

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A file another node holds is read from a copy in this node's read cache.
// While the copy is being fetched, reads must wait for their blocks, so
// the kernel cannot be handed the copy (passthrough): those opens are
// served through the daemon (direct I/O); once the copy is whole, opens
// are passed through. The kernel refuses to mix passthrough with opens
// served through the daemon on one inode (an open in the other mode fails
// with EIO), so a file keeps the mode of its open handles until the last
// is released.

// opens counts a remote file's open handles by I/O mode.
type opens struct {
	mu     sync.Mutex
	cached int // served through the daemon
	passed int // passed through to the copy
	copyFd int // the whole copy, while passed > 0
}

// Open opens the file for reading: from the whole copy (this node's own
// file or the read cache's, which the namespace may fetch now), or while
// a large file's copy is still being fetched, with reads that wait for
// the blocks they need (the namespace fetches them from the node that
// holds them, once for every reader on this node). A holder that stays
// unreachable, or bytes that do not match what was protected, fail the
// open or read with EIO (the namespace logs which node and why): never
// wrong bytes.
func (n *remoteNode) Open(ctx context.Context, flags uint32) (fh gofs.FileHandle, fuseFlags uint32, errno syscall.Errno) {
	defer n.fsys.observe(opOpen, time.Now(), &errno)
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	e, errno := n.entry()
	if errno != 0 {
		return nil, 0, errno
	}
	n.mu.Lock()
	if n.passed > 0 {
		defer n.mu.Unlock()
		return n.passedLocked(e.Meta.Size)
	}
	n.mu.Unlock()
	// The open may wait for the fetch of a small file: not under n.mu.
	local, r, err := n.src.open(ctx, e)
	switch {
	case errors.Is(err, context.Canceled):
		return nil, 0, syscall.EINTR
	case err != nil:
		return nil, 0, syscall.EIO
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.passed > 0 { // passed through meanwhile
		if r != nil {
			r.Close()
		}
		return n.passedLocked(e.Meta.Size)
	}
	if r != nil && !r.Whole() {
		n.cached++
		h := &remoteHandle{node: n, fd: -1, r: r, size: e.Meta.Size}
		if n.src.cached() {
			// A checkpoint arriving at a restart: the kernel reads ahead
			// in large requests and small reads are served from its page
			// cache, as they are from the cache file once it is whole
			// (redbench's ranks read 8 KiB at a time: 5 s for 256 MiB
			// per node through the daemon, 1.4 s so).
			return h, 0, 0
		}
		// Direct I/O: reads come to the daemon at the application's size
		// and land in its buffer, with no second copy of the file in the
		// kernel's page cache beside the read cache's (a shared mapping
		// still works: CAP_DIRECT_IO_ALLOW_MMAP).
		return h, fuse.FOPEN_DIRECT_IO, 0
	}
	fd, err := wholeCopy(local, r)
	if err != nil {
		return nil, 0, n.fsys.toErrno(err)
	}
	switch {
	case !n.fsys.passthrough.Load():
		n.cached++
		return &remoteHandle{node: n, fd: fd, size: e.Meta.Size}, fuse.FOPEN_KEEP_CACHE, 0
	case n.cached > 0:
		// Opens of the copy while it was fetched are still open (or their
		// release is still on its way): no page cache beside the copy for
		// this one either, as the next open is likely passed through.
		n.cached++
		return &remoteHandle{node: n, fd: fd, size: e.Meta.Size}, fuse.FOPEN_DIRECT_IO, 0
	}
	n.copyFd, err = syscall.Dup(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, 0, n.fsys.toErrno(err)
	}
	n.passed++
	return &remoteHandle{node: n, fd: fd, size: e.Meta.Size, passed: true}, 0, 0
}

// wholeCopy opens the whole copy at local, or the one r fetched (and
// closes r).
func wholeCopy(local string, r RemoteFile) (int, error) {
	if r == nil {
		return syscall.Open(local, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	}
	defer r.Close()
	return syscall.Dup(int(r.Fd()))
}

// passedLocked opens the file as its passed-through opens are: the kernel
// reads the copy it was handed first, and this descriptor only keeps the
// mode. n.mu is held.
func (n *remoteNode) passedLocked(size int64) (gofs.FileHandle, uint32, syscall.Errno) {
	fd, err := syscall.Dup(n.copyFd)
	if err != nil {
		return nil, 0, n.fsys.toErrno(err)
	}
	n.passed++
	return &remoteHandle{node: n, fd: fd, size: size, passed: true}, 0, 0
}

// remoteHandle is one open of a file another node holds.
type remoteHandle struct {
	node   *remoteNode
	fd     int        // the whole copy, or -1 while r fetches it
	r      RemoteFile // the copy being fetched, or nil
	size   int64
	passed bool
}

// PassthroughFd offers the whole copy to the kernel when the file's mode
// allows it.
func (h *remoteHandle) PassthroughFd() (int, bool) { return h.fd, h.passed }

// Read serves a read from the copy, once its blocks are there, spliced to
// the kernel where a pipe can carry the reply (readReply).
func (h *remoteHandle) Read(ctx context.Context, dest []byte, off int64) (res fuse.ReadResult, errno syscall.Errno) {
	fsys := h.node.fsys
	defer fsys.observe(opRead, time.Now(), &errno)
	fd, k := h.fd, int(min(int64(len(dest)), max(h.size-off, 0)))
	if h.r != nil {
		var err error
		k, err = h.r.Await(ctx, off, len(dest))
		switch {
		case errors.Is(err, context.Canceled):
			return nil, syscall.EINTR
		case err != nil:
			return nil, syscall.EIO
		}
		fd = int(h.r.Fd())
	}
	fsys.metrics.read.Add(float64(k))
	return fsys.readReply(fd, dest, off, k)
}

// Flush is not needed: nothing is written.
func (h *remoteHandle) Flush(ctx context.Context) syscall.Errno { return syscall.ENOSYS }

// Release ends the open; the last open of a copy still being fetched stops
// the fetch.
func (h *remoteHandle) Release(ctx context.Context) syscall.Errno {
	if h.r != nil {
		h.r.Close()
	} else {
		syscall.Close(h.fd)
	}
	n := h.node
	n.mu.Lock()
	defer n.mu.Unlock()
	if !h.passed {
		n.cached--
		return 0
	}
	if n.passed--; n.passed == 0 {
		syscall.Close(n.copyFd)
	}
	return 0
}
