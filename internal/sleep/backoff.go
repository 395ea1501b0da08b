package sleep

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is the pause between the tries of a retry loop: it doubles from
// Min up to Max, so a loop answers at once when the wait is short and
// costs little when it is long. The zero value of its state starts at Min;
// one Backoff serves one loop (it is not safe for concurrent use).
type Backoff struct {
	Min, Max time.Duration
	// Jitter draws each pause from [d/2, d] instead of d, so that the
	// nodes of a job that lost the same peer do not retry in lockstep.
	Jitter bool

	cur time.Duration // the next pause before jitter; 0: Min
}

// Next returns the next pause and doubles the one after, up to Max. A Min
// above Max starts at Max.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = min(b.Min, b.Max)
	}
	d := b.cur
	b.cur = min(2*b.cur, b.Max)
	if !b.Jitter {
		return d
	}
	half := d / 2
	return half + rand.N(half+1)
}

// Reset starts the pauses again from Min: the thing waited for showed it
// is there.
func (b *Backoff) Reset() { b.cur = 0 }

// Wait pauses for Next, or returns ctx's error as soon as ctx ends.
func (b *Backoff) Wait(ctx context.Context) error { return For(ctx, b.Next()) }
