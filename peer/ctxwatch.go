package peer

import (
	"context"
	"net"
	"sync"
	"time"
)

// ctxWatch makes one direction of a connection honour a ctx: when the ctx
// ends, the direction's deadline is moved into the past, which unblocks a
// Read or Write in progress. It registers context.AfterFunc once per distinct
// ctx (identified by its Done channel) rather than once per frame, so a
// stream driven with the same ctx allocates nothing per frame.
type ctxWatch struct {
	c    *net.TCPConn
	read bool // read or write deadline

	mu sync.Mutex // protects the fields below
	// done is the Done channel of the watched ctx; stop unregisters it.
	done  <-chan struct{}
	stop  func() bool
	fired bool // the watched ctx ended and the deadline is in the past
}

func (w *ctxWatch) setDeadlineLocked(t time.Time) {
	if w.read {
		_ = w.c.SetReadDeadline(t)
	} else {
		_ = w.c.SetWriteDeadline(t)
	}
}

// begin watches ctx and sets the deadline to d. If ctx is already done it
// returns ctx.Err() and leaves the deadline alone.
func (w *ctxWatch) begin(ctx context.Context, d time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	done := ctx.Done()
	if done != w.done {
		if w.stop != nil {
			// If the old ctx's callback is already running it waits for
			// mu and then sees that it is no longer watched.
			w.stop()
			w.stop = nil
		}
		w.done, w.fired = done, false
		if done != nil {
			w.stop = context.AfterFunc(ctx, func() { w.fire(done) })
		}
	}
	if w.fired {
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w.setDeadlineLocked(d)
	return nil
}

// extend moves the deadline to d unless the watched ctx has ended.
func (w *ctxWatch) extend(d time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.fired {
		w.setDeadlineLocked(d)
	}
}

// fired reports whether the watched ctx ended during the operation.
func (w *ctxWatch) hasFired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

func (w *ctxWatch) fire(done <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done == done {
		w.fired = true
		w.setDeadlineLocked(aLongTimeAgo)
	}
}

// release stops watching.
func (w *ctxWatch) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
	w.done = nil
}
