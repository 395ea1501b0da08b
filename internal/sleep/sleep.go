// Package sleep waits for a while unless a context ends first: the one
// place the daemons' retry loops, rate limits and test transports pause,
// and the one backoff of every retry loop (Backoff).
package sleep

import (
	"context"
	"time"
)

// For waits d and returns nil, or returns ctx's error as soon as ctx ends.
// A d of zero or less returns nil at once.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
