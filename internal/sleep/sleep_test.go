package sleep

import (
	"context"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	if err := For(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("a sleep that ran out: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := For(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("a sleep whose context ended: %v, want context.Canceled", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("a sleep whose context ended did not return at once")
	}
	if err := For(ctx, 0); err != nil {
		t.Fatalf("a sleep of zero: %v", err)
	}
}
