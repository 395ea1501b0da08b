package prefix

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Options tune one Flush or Fetch call. The zero value works: 4 streams,
// no limit, no CRC, no progress, logs discarded, per-call buffers.
type Options struct {
	// Streams is how many copies run at once. Files are copied
	// concurrently, and files above 64 MiB are split into 32 MiB ranges
	// that several streams write at their offsets of one destination file.
	// <= 0 means 4.
	Streams int
	// Limiter caps the bandwidth of all streams together; it may be shared
	// by concurrent calls. nil = unlimited.
	Limiter *Limiter
	// CRC computes the CRC32C of every file (Flush) or verifies it (Fetch).
	// Without it a directory's Flush may use copy_file_range and Fetch
	// checks sizes only. (Object storage always computes and checks it: it
	// is the objects' checksum.)
	CRC bool
	// Progress, if set, is called with the bytes done so far and the total
	// at most about 10 times a second, from a goroutine of the call, and,
	// once copying has begun, once more before the call returns (with
	// done == total on success). Calls never overlap. It must not block.
	Progress func(done, total int64)
	// Landed, if set, hears during a Fetch that block b (BlockSize bytes
	// at b·BlockSize) of the file at path is in place in the destination
	// and checked: against its block CRC where the manifest has them,
	// else once the whole file is. It is called from the copying streams
	// and must not block.
	Landed func(path string, b int)
	// Skip, if set, tells a Fetch that block b of the file at path is in
	// place in the destination already, checked against its block CRC
	// (read ahead of the fetch): it is not copied again, and that CRC
	// stands for it in the file's. Only files with block CRCs are skipped
	// in.
	Skip func(path string, b int) bool
	// Logger receives debug and warning records, keyed by dataset; the
	// caller adds its own context (the daemon: node and job). nil discards
	// them.
	Logger *slog.Logger
	// Metrics, if set, records bytes, files, failures and durations.
	Metrics *Metrics
	// Buffers, if set, supplies the copy buffers, so a daemon faults their
	// memory in once instead of on every call. nil = allocate per call.
	Buffers *Buffers
}

const defaultStreams = 4

// maxStreams bounds Streams: each stream holds a buffer and two open files.
const maxStreams = 256

func (o Options) normalized() Options {
	if o.Streams <= 0 {
		o.Streams = defaultStreams
	}
	if o.Streams > maxStreams {
		o.Streams = maxStreams
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Buffers == nil {
		o.Buffers = NewBuffers(0)
	}
	return o
}

// DefaultBufferSize is the size of one copy buffer. 1 MiB amortises the
// system calls and still fits in L2 with the CRC pass right behind the read.
const DefaultBufferSize = 1 << 20

// Buffers is a free list of equally sized copy buffers. Buffers handed back
// are kept for the next call, never released: a daemon's flushes reuse the
// same Streams × size bytes. Safe for concurrent use.
type Buffers struct {
	size int

	// mu protects free.
	mu   sync.Mutex
	free [][]byte
}

// NewBuffers returns an empty pool of buffers of size bytes (<= 0:
// DefaultBufferSize). Sizes are rounded up to a multiple of 4 KiB.
func NewBuffers(size int) *Buffers {
	if size <= 0 {
		size = DefaultBufferSize
	}
	size = (size + 4095) &^ 4095
	return &Buffers{size: size}
}

func (b *Buffers) get() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(b.free); n > 0 {
		p := b.free[n-1]
		b.free = b.free[:n-1]
		return p
	}
	return make([]byte, b.size)
}

func (b *Buffers) put(p []byte) {
	b.mu.Lock()
	b.free = append(b.free, p)
	b.mu.Unlock()
}

// progressInterval spaces Progress calls: ~10 per second.
const progressInterval = 100 * time.Millisecond

// progress counts bytes done and reports them from one goroutine.
type progress struct {
	done  atomic.Int64
	total int64
	fn    func(done, total int64)
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startProgress(fn func(done, total int64), total int64) *progress {
	p := &progress{total: total, fn: fn, stop: make(chan struct{})}
	if fn == nil {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		last := int64(-1)
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				if d := p.done.Load(); d != last {
					last = d
					p.fn(d, p.total)
				}
			}
		}
	}()
	return p
}

func (p *progress) add(n int64) { p.done.Add(n) }

// finish stops the reporter and makes the final call.
func (p *progress) finish() {
	close(p.stop)
	p.wg.Wait()
	if p.fn != nil {
		p.fn(p.done.Load(), p.total)
	}
}
