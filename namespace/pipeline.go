package namespace

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/scrfs/scrfs/internal/crc32c"
)

// A range moves through a pipeline: the holder reads (and checks) the next
// piece while it sends one, and the receiver checks the next while it
// writes one into its copy. Each side had done both in turn, on one
// goroutine, so the holder's disk and the receiver's writes into new tmpfs
// pages (which cost more than receiving) each stalled the stream in turn.

// pipeDepth is how many pieces one stage may be ahead of the next.
const pipeDepth = 2

// readAhead reads f's bytes off..off+length in pieces of blockSize on a
// goroutine of its own, up to pipeDepth pieces ahead of fn, which is given
// each piece in order with its CRC32C when sum is set.
func readAhead(f *os.File, off, length int64, sum bool, fn func(at int64, crc uint32, b []byte) error) error {
	type read struct {
		bp  *[]byte
		b   []byte
		at  int64
		crc uint32
		err error
	}
	ready := make(chan read, pipeDepth)
	free := make(chan *[]byte, pipeDepth+1)
	for range pipeDepth + 1 {
		free <- pieceBufs.Get().(*[]byte)
	}
	stop := make(chan struct{})
	go func() {
		defer close(ready)
		for at := off; at < off+length; at += blockSize {
			var bp *[]byte
			select {
			case <-stop: // before a free buffer, which the consumer still returns
				return
			default:
			}
			select {
			case bp = <-free:
			case <-stop:
				return
			}
			b := (*bp)[:min(blockSize, off+length-at)]
			_, err := f.ReadAt(b, at)
			if err != nil {
				err = fmt.Errorf("read %s: %w", f.Name(), err)
			}
			var c uint32
			if err == nil && sum {
				c = crc32c.Checksum(b)
			}
			ready <- read{bp: bp, b: b, at: at, crc: c, err: err}
			if err != nil {
				return
			}
		}
	}()
	var err error
	for r := range ready {
		if err == nil {
			if err = r.err; err == nil {
				err = fn(r.at, r.crc, r.b)
			}
			if err != nil {
				close(stop)
			}
		}
		free <- r.bp
	}
	for range pipeDepth + 1 {
		pieceBufs.Put(<-free)
	}
	return err
}

// landing writes a remote file's checked pieces into its copy behind the
// receiver, on a goroutine of its own, in at most pipeDepth+1 buffers.
type landing struct {
	r    *Remote
	mark bool // each piece counts for readers once written
	todo chan piece
	free chan *[]byte
	done chan struct{}

	mu  sync.Mutex
	err error // the first write that failed
}

// piece is a checked piece of bytes at its offset, in a buffer of landing's.
type piece struct {
	buf *[]byte
	b   []byte
	at  int64
}

func startLanding(r *Remote, mark bool) *landing {
	l := &landing{r: r, mark: mark, todo: make(chan piece, pipeDepth),
		free: make(chan *[]byte, pipeDepth+1), done: make(chan struct{})}
	for range pipeDepth + 1 {
		l.free <- pieceBufs.Get().(*[]byte)
	}
	go l.run()
	return l
}

func (l *landing) run() {
	defer close(l.done)
	for p := range l.todo {
		if l.failed() == nil {
			if _, err := l.r.f.WriteAt(p.b, p.at); err != nil {
				l.mu.Lock()
				l.err = err
				l.mu.Unlock()
			} else if l.mark {
				l.r.arrived(p.at, int64(len(p.b)))
			}
		}
		l.free <- p.buf
	}
}

func (l *landing) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// buffer returns a buffer to receive the next piece into, once one is free,
// or the error of a write that failed.
func (l *landing) buffer(ctx context.Context) (*[]byte, error) {
	select {
	case bp := <-l.free:
		if err := l.failed(); err != nil {
			l.free <- bp
			return nil, err
		}
		return bp, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// land hands piece b (in buffer bp) at offset at to the writer.
func (l *landing) land(bp *[]byte, b []byte, at int64) {
	l.todo <- piece{buf: bp, b: b, at: at}
}

// finish waits for the pieces handed over to be written and returns the
// buffers; the error is the first write's that failed.
func (l *landing) finish() error {
	close(l.todo)
	<-l.done
	for range pipeDepth + 1 {
		pieceBufs.Put(<-l.free)
	}
	return l.failed()
}
