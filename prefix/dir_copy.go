package prefix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
)

// The copy engine shared by Flush and Fetch: a fixed list of range jobs
// (whole small files, 32 MiB ranges of large ones) that Streams workers pull
// in order, each with its own buffer. The first range of a file to run opens
// it, the last one to finish combines the range CRCs and finishes the file.

const (
	// maxPendingSyncs bounds the files written but not yet fsynced.
	maxPendingSyncs = 64
	// rangeSize is the piece of a large file one stream copies. Large
	// enough that per-range overhead (two lseeks, a CRC combine) vanishes,
	// small enough that a few big files keep every stream busy.
	rangeSize = 32 << 20
	// splitAbove is the size from which a file is split into ranges.
	splitAbove = 2 * rangeSize
)

// fileTask is one regular file being copied. Each side is opened as
// openat(dir, name): the cache's side by its path (dir AT_FDCWD), the
// prefix's by one name in a verified directory held open (dirTable), so
// that no link on the way is followed.
type fileTask struct {
	e       *Entry // filled in (Flush) or checked (Fetch) when the copy ends
	srcDir  int
	src     string // the name read, in srcDir
	dstDir  int
	dst     string // the name written, in dstDir: a temporary name during Flush
	srcName string // the source's path or URL, for errors
	name    string // the destination path errors name
	size    int64

	lens []int64  // length of each range
	crcs []uint32 // CRC32C of each range; written by its stream
	sums *blockSums
	left atomic.Int32

	// Set once by the first range's stream, read by the others after
	// once.Do returns.
	once        sync.Once
	openErr     error
	in, out     *os.File
	inFd, outFd int
	seekData    bool // SEEK_DATA/SEEK_HOLE worked on in: skip holes
	finished    bool // closed and done; written only by the stream or syncer that closes it
}

type rangeJob struct {
	t      *fileTask
	idx    int
	off, n int64
}

// copier runs one Flush's or Fetch's file copies.
type copier struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	o      Options
	fetch  bool // check sizes and CRCs against the entries rather than record them
	sync   bool // fsync each file (Flush: the prefix must be durable)
	prog   *progress

	tasks []*fileTask
	jobs  []rangeJob
	next  atomic.Int64
	syncQ chan *fileTask // written files waiting for fsync (Flush only)
	noCFR atomic.Bool    // copy_file_range was refused once: stop trying

	// mu protects err, the first failure.
	mu  sync.Mutex
	err error
}

func newCopier(ctx context.Context, o Options, tasks []*fileTask, fetch bool, prog *progress) *copier {
	c := &copier{o: o, fetch: fetch, sync: !fetch, prog: prog, tasks: tasks}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	// Largest files first: their ranges spread over all streams while the
	// small files fill the tail.
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].size > tasks[j].size })
	for _, t := range tasks {
		n := int64(1)
		if t.size > splitAbove {
			n = (t.size + rangeSize - 1) / rangeSize
		}
		t.lens = make([]int64, n)
		t.crcs = make([]uint32, n)
		t.sums = newBlockSums(t.size, nil)
		if fetch {
			t.sums.done = c.o.fetchedBlock(t.e, t.srcName)
		}
		t.left.Store(int32(n))
		for i := int64(0); i < n; i++ {
			off := i * rangeSize
			l := min(t.size-off, rangeSize)
			if n == 1 {
				off, l = 0, t.size
			}
			t.lens[i] = l
			c.jobs = append(c.jobs, rangeJob{t: t, idx: int(i), off: off, n: l})
		}
	}
	return c
}

// run copies everything and returns the first error. Open files are closed
// whatever happens; on error the caller removes what was written.
func (c *copier) run() error {
	defer c.cancel(nil)
	streams := min(c.o.Streams, len(c.jobs))
	var syncers sync.WaitGroup
	if c.sync {
		// fsync runs beside the copy, not in it: a stream that waited for
		// each file's fsync would leave the device idle while it reads the
		// next file, and the CPU idle while the device writes.
		c.syncQ = make(chan *fileTask, maxPendingSyncs)
		for range streams {
			syncers.Add(1)
			go func() {
				defer syncers.Done()
				c.syncer()
			}()
		}
	}
	var wg sync.WaitGroup
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := c.o.Buffers.get()
			defer c.o.Buffers.put(buf)
			c.worker(buf)
		}()
	}
	wg.Wait()
	if c.syncQ != nil {
		close(c.syncQ)
		syncers.Wait()
	}
	for _, t := range c.tasks {
		if !t.finished {
			closeFile(t.in)
			closeFile(t.out)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return c.ctx.Err() // the caller's ctx ended before every job ran
}

func (c *copier) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.cancel(err)
}

func (c *copier) worker(buf []byte) {
	for c.ctx.Err() == nil {
		i := c.next.Add(1) - 1
		if i >= int64(len(c.jobs)) {
			return
		}
		if err := c.copyJob(&c.jobs[i], buf); err != nil {
			c.fail(err)
			return
		}
	}
}

func (c *copier) copyJob(j *rangeJob, buf []byte) error {
	t := j.t
	t.once.Do(func() { t.openErr = c.open(t) })
	if t.openErr != nil {
		return t.openErr
	}
	crc, err := c.copyRange(t, j.off, j.n, buf)
	if err != nil {
		return err
	}
	t.crcs[j.idx] = crc
	if t.left.Add(-1) > 0 {
		return nil
	}
	return c.finish(t)
}

// open opens t's source and creates its destination at full length, so
// ranges can be written at their offsets and trailing holes stay holes.
// Flush creates its temporary file exclusively, after removing one a
// crashed flush of this node left: a file that is not ours is never opened
// for writing, so its owner and mode are never ours to change.
func (c *copier) open(t *fileTask) error {
	var err error
	if c.fetch {
		t.in, err = openPrefixFile(t.srcDir, t.src, t.srcName, t.size)
	} else {
		t.in, err = openFlushed(t.srcDir, t.src, t.srcName, t.size)
	}
	if err != nil {
		return err
	}
	t.inFd = int(t.in.Fd())
	t.seekData = true
	_ = unix.Fadvise(t.inFd, 0, 0, unix.FADV_SEQUENTIAL) // a hint; failure is harmless
	if t.outFd, err = createDst(t.dstDir, t.dst, !c.fetch); err != nil {
		return pathErr("create", t.name, err)
	}
	t.out = os.NewFile(uintptr(t.outFd), t.name)
	if t.size > 0 {
		if err := t.out.Truncate(t.size); err != nil {
			return pathErr("truncate", t.name, err)
		}
	}
	return nil
}

// openPrefixFile opens regular file name in dir of the prefix, whose path
// srcName is, to read size bytes. The prefix is another party's store: a
// symlink that replaced the file is never followed, and a file that is
// missing, not regular or of another size is a *CorruptError.
func openPrefixFile(dir int, name, srcName string, size int64) (*os.File, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, &CorruptError{Path: srcName, Reason: "missing"}
	case errors.Is(err, unix.ELOOP):
		return nil, &CorruptError{Path: srcName, Reason: "is a symbolic link, manifest says file"}
	case err != nil:
		return nil, pathErr("open", srcName, err)
	}
	return checkedFile(fd, srcName, func(st os.FileInfo) error {
		switch {
		case !st.Mode().IsRegular():
			return &CorruptError{Path: srcName, Reason: fmt.Sprintf("is a %s, manifest says file", files.ModeName(st.Mode()))}
		case st.Size() != size:
			return &CorruptError{Path: srcName, Reason: fmt.Sprintf("size %d, manifest says %d", st.Size(), size)}
		}
		return nil
	})
}

// openFlushed opens name in dir of the cache, whose path srcName is, to
// flush its size bytes: a file that changed since it was listed fails the
// flush.
func openFlushed(dir int, name, srcName string, size int64) (*os.File, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathErr("open", srcName, err)
	}
	return checkedFile(fd, srcName, func(st os.FileInfo) error {
		if !st.Mode().IsRegular() || st.Size() != size {
			return pathErr("read", srcName, fmt.Errorf("changed during flush (size %d, was %d)", st.Size(), size))
		}
		return nil
	})
}

// checkedFile returns open descriptor fd as srcName's file once check
// passed on what it is; else fd is closed.
func checkedFile(fd int, srcName string, check func(os.FileInfo) error) (*os.File, error) {
	f := os.NewFile(uintptr(fd), srcName)
	st, err := f.Stat()
	if err != nil {
		err = pathErr("stat", srcName, err)
	} else {
		err = check(st)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// createDst creates the file name in dir for writing, mode 0600 until its
// attributes are set. Exclusive (the prefix's temporary names), whatever
// is at the name is removed first and a new file made, never opened; else
// (the cache's staging directory, emptied before a fetch) a file already
// there is opened as it is: blocks read ahead of the fetch (ReadBlock) may
// be in it already.
func createDst(dir int, name string, exclusive bool) (int, error) {
	flags := unix.O_WRONLY | unix.O_CREAT | unix.O_CLOEXEC | unix.O_NOFOLLOW
	if exclusive {
		if err := unix.Unlinkat(dir, name, 0); err != nil && err != unix.ENOENT {
			return -1, err
		}
		flags |= unix.O_EXCL
	}
	return unix.Openat(dir, name, flags, 0o600)
}

// finish runs on the stream that copied t's last range: it checks or
// records the CRC, applies owner, mode and mtime, syncs and closes.
func (c *copier) finish(t *fileTask) error {
	var crc uint32
	for i, r := range t.crcs {
		crc = crc32c.Combine(crc, r, t.lens[i])
	}
	e := t.e
	if c.fetch && c.o.CRC && e.HasCRC && crc != e.CRC32C {
		return &CorruptError{Path: t.srcName, Reason: fmt.Sprintf("crc32c %08x, manifest says %08x", crc, e.CRC32C)}
	}
	if !c.fetch {
		e.CRC32C, e.HasCRC = crc, c.o.CRC
		e.Blocks = nil
		if c.o.CRC && len(t.sums.sums) > 1 {
			e.Blocks = t.sums.sums
		}
	}
	if err := setAttrs(t.outFd, e, t.name); err != nil {
		return err
	}
	if c.fetch {
		c.o.landedAll(e)
	}
	closeFile(t.in)
	t.in = nil
	if c.sync {
		// Blocks when maxPendingSyncs files wait: the copy must not run
		// arbitrarily far ahead of the device (open files, dirty memory).
		select {
		case c.syncQ <- t:
			return nil
		case <-c.ctx.Done():
			return context.Cause(c.ctx)
		}
	}
	return c.close(t)
}

// syncer fsyncs and closes the files the streams wrote, until the queue is
// closed. After a failure it only closes them (run's cleanup would too).
func (c *copier) syncer() {
	for t := range c.syncQ {
		if c.ctx.Err() != nil {
			continue
		}
		if err := t.out.Sync(); err != nil {
			c.fail(pathErr("fsync", t.name, err))
			continue
		}
		// The bytes are on stable storage: drop them from this node's page
		// cache, which belongs to the application.
		_ = unix.Fadvise(t.outFd, 0, 0, unix.FADV_DONTNEED)
		if err := c.close(t); err != nil {
			c.fail(err)
		}
	}
}

// close closes t's destination and marks it done.
func (c *copier) close(t *fileTask) error {
	t.finished = true
	if err := t.out.Close(); err != nil {
		return pathErr("close", t.name, err)
	}
	return nil
}

func closeFile(f *os.File) {
	if f != nil {
		_ = f.Close() // error path: the copy already failed
	}
}
