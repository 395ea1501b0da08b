package schemes

import (
	"context"
	"sync"
)

// prefetcher runs a sequence of reads on its own goroutine, a few buffers
// ahead of the consumer, so disk reads overlap computing and sending.
// Buffers go back with release, possibly from another goroutine (a link
// sender once the bytes have left).
type prefetcher struct {
	ready chan pfItem
	slots chan struct{} // one per buffer out, so at most nbuf exist
	pool  sizedPool
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

type pfItem struct {
	buf []byte
	err error
}

// startPrefetch calls read(i, buf) for i in [0, n) in order, each with a
// buffer from pool (full length); read returns the prefix of buf to deliver.
// At most nbuf buffers are out at once; the consumer holding nbuf stalls
// the reader until it releases one.
func startPrefetch(ctx context.Context, n, nbuf int, pool sizedPool, read func(i int, buf []byte) ([]byte, error)) *prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	p := &prefetcher{ready: make(chan pfItem, nbuf), slots: make(chan struct{}, nbuf), pool: pool, stop: cancel}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for i := 0; i < n; i++ {
			select {
			case p.slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			buf := pool.get(pool.size)
			out, err := read(i, buf)
			if err != nil {
				p.release(buf)
			}
			select {
			case p.ready <- pfItem{buf: out, err: err}:
			case <-ctx.Done():
				if out != nil {
					p.release(out)
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

// next returns the next filled buffer.
func (p *prefetcher) next(ctx context.Context) ([]byte, error) {
	select {
	case it := <-p.ready:
		return it.buf, it.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// release gives a buffer back for reuse; call it exactly once per buffer
// next returned.
func (p *prefetcher) release(b []byte) {
	p.pool.put(b)
	<-p.slots
}

// close stops the reader and waits for it. Buffers still out may be
// released afterwards.
func (p *prefetcher) close() {
	p.stop()
	p.wg.Wait()
	for {
		select {
		case it := <-p.ready:
			if it.buf != nil {
				p.release(it.buf)
			}
		default:
			return
		}
	}
}

// writeBehind writes received pieces on its own goroutine, so a member
// that receives a stream (a rebuilt member, mostly) keeps receiving while
// the previous piece goes to disk.
type writeBehind struct {
	s    *session
	ch   chan wbItem
	done chan struct{}
	err  error // set by the writer before done closes
}

type wbItem struct {
	buf   []byte // a frame + payload from s.pool, returned after writing
	write func(payload []byte) error
}

func startWriteBehind(s *session, depth int) *writeBehind {
	w := &writeBehind{s: s, ch: make(chan wbItem, depth), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for it := range w.ch {
			if w.err == nil {
				if w.err = it.write(it.buf[frameLen:]); w.err != nil {
					s.fail(w.err)
				}
			}
			s.pool.put(it.buf)
		}
	}()
	return w
}

// submit queues buf (ownership passes to the writer) to be written by fn.
func (w *writeBehind) submit(buf []byte, fn func(payload []byte) error) error {
	select {
	case w.ch <- wbItem{buf: buf, write: fn}:
		return nil
	case <-w.s.ctx.Done():
		w.s.pool.put(buf)
		return w.s.err()
	}
}

// finish waits for queued writes and returns the first write error.
func (w *writeBehind) finish() error {
	close(w.ch)
	<-w.done
	return w.err
}

// inflight bounds how many messages a producer has handed to links and not
// yet seen sent. Per-link queues alone would let a producer that feeds many
// links (RS with large sets) buffer pieces for all of them at once. A limit
// above the messages a member sends per step cannot deadlock: the slowest
// consumer's step is always sendable.
type inflight struct {
	s     *session
	slots chan struct{}
}

func newInflight(s *session, limit int) *inflight {
	return &inflight{s: s, slots: make(chan struct{}, limit)}
}

// acquire waits for a free slot; release frees it (from the sender, once the
// message has left).
func (f *inflight) acquire() error {
	select {
	case f.slots <- struct{}{}:
		return nil
	case <-f.s.ctx.Done():
		return f.s.err()
	}
}

func (f *inflight) release() { <-f.slots }
