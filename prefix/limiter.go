package prefix

import (
	"context"
	"sync"
	"time"

	"github.com/scrfs/scrfs/internal/sleep"
)

// Limiter is a token bucket shared by every copy stream it is handed to, so
// that a node's flushes and fetches together stay under one bandwidth budget
// towards the parallel file system. A nil *Limiter, or one made with a rate
// of 0, never waits. Safe for concurrent use.
type Limiter struct {
	rate  float64 // bytes per second; 0 = unlimited
	burst float64 // the most tokens that can pile up while idle

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	// mu protects the fields below.
	mu     sync.Mutex
	tokens float64 // may go negative: a large request borrows from the future
	last   time.Time
}

// limiterBurst is how long an idle stream may save up for. Short enough that
// the rate holds over any second, long enough that a 1 MiB request at a few
// MB/s does not wait on every call.
const limiterBurst = 100 * time.Millisecond

// minLimiterStep is the least a throttled stream moves per wait: below
// it, the calls would cost more than the bytes.
const minLimiterStep = 16 << 10

// Step returns how many of n bytes a stream moves per wait: all of them
// when unlimited, else at most one burst's worth, so that a slow budget
// copies (and its progress shows) as it goes instead of sleeping a whole
// buffer's time before the buffer's first byte moves.
func (l *Limiter) Step(n int) int {
	if l == nil || l.rate == 0 {
		return n
	}
	return min(n, max(int(l.burst), minLimiterStep))
}

// NewLimiter returns a limiter of bytesPerSec for all streams together;
// bytesPerSec <= 0 means unlimited.
func NewLimiter(bytesPerSec int64) *Limiter {
	return newLimiter(bytesPerSec, time.Now, sleep.For)
}

// newLimiter lets tests drive the limiter with a fake clock.
func newLimiter(bytesPerSec int64, now func() time.Time, sleep func(context.Context, time.Duration) error) *Limiter {
	l := &Limiter{now: now, sleep: sleep}
	if bytesPerSec > 0 {
		l.rate = float64(bytesPerSec)
		l.burst = l.rate * limiterBurst.Seconds()
		l.last = now()
		l.tokens = l.burst
	}
	return l
}

// Wait blocks until n more bytes may be transferred, or ctx is done. It
// returns how long it waited (for metrics) and ctx's error if it gave up.
// Tokens of a wait that was cut short stay spent: the caller is stopping
// anyway.
func (l *Limiter) Wait(ctx context.Context, n int) (time.Duration, error) {
	if l == nil || l.rate == 0 || n <= 0 {
		return 0, nil
	}
	l.mu.Lock()
	now := l.now()
	if el := now.Sub(l.last); el > 0 {
		l.tokens += el.Seconds() * l.rate
		if l.tokens > l.burst {
			l.tokens = l.burst
		}
	}
	l.last = now
	// Reserve first, then sleep outside the lock: concurrent streams queue
	// behind each other's reservations instead of racing for tokens.
	l.tokens -= float64(n)
	var d time.Duration
	if l.tokens < 0 {
		d = time.Duration(-l.tokens / l.rate * float64(time.Second))
	}
	l.mu.Unlock()
	if d == 0 {
		return 0, nil
	}
	return d, l.sleep(ctx, d)
}
