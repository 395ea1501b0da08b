package schemes

import (
	"context"
	"sync"
)

// prefetcher runs a sequence of reads on its own goroutine, a few pieces
// ahead of the consumer, so disk reads overlap computing and sending. Pieces go back with release, possibly from
// another goroutine (a link sender once the bytes have left).
type prefetcher struct {
	ready chan pfItem
	slots chan struct{} // one per piece out, so at most nbuf exist
	pool  sizedPool
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

type pfItem struct {
	pc  span
	err error
}

// span is a run of bytes read for an operation, in a buffer from the
// session's pool with frame room in front (buf[:frameLen] free for the
// header, the bytes after it).
type span struct {
	buf []byte
	// crc is the CRC32C of the bytes when hasCRC (a read from one file
	// computes it for the file's CRC anyway).
	crc    uint32
	hasCRC bool
}

// payload returns the span's bytes.
func (pc span) payload() []byte { return pc.buf[frameLen:] }

// startPrefetch calls read(i, buf) for i in [0, n) in order, each with a
// buffer from pool (full length) to fill. At most nbuf pieces are out at once; the consumer holding
// nbuf stalls the reader until it releases one.
func startPrefetch(ctx context.Context, n, nbuf int, pool sizedPool, read func(i int, buf []byte) (span, error)) *prefetcher {
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
			pc, err := read(i, buf)
			if pc.buf == nil {
				pool.put(buf)
			}
			if err != nil {
				p.release(pc)
				pc = span{}
			}
			select {
			case p.ready <- pfItem{pc: pc, err: err}:
			case <-ctx.Done():
				if err == nil {
					p.release(pc)
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

// next returns the next piece.
func (p *prefetcher) next(ctx context.Context) (span, error) {
	select {
	case it := <-p.ready:
		return it.pc, it.err
	case <-ctx.Done():
		return span{}, context.Cause(ctx)
	}
}

// release gives a piece back; call it exactly once per piece next
// returned.
func (p *prefetcher) release(pc span) {
	if pc.buf != nil {
		p.pool.put(pc.buf)
	}
	<-p.slots
}

// close stops the reader and waits for it. Pieces still out may be
// released afterwards.
func (p *prefetcher) close() {
	p.stop()
	p.wg.Wait()
	for {
		select {
		case it := <-p.ready:
			if it.err == nil {
				p.release(it.pc)
			}
		default:
			return
		}
	}
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
