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

func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	b := Backoff{Min: 20 * ms, Max: 100 * ms}
	for i, want := range []time.Duration{20 * ms, 40 * ms, 80 * ms, 100 * ms, 100 * ms} {
		if got := b.Next(); got != want {
			t.Fatalf("pause %d: %v, want %v", i, got, want)
		}
	}
	b.Reset()
	if got := b.Next(); got != 20*ms {
		t.Fatalf("pause after Reset: %v, want Min", got)
	}
	if got := (&Backoff{Min: time.Second, Max: 10 * ms}).Next(); got != 10*ms {
		t.Fatalf("Min above Max: %v, want Max", got)
	}
	j := Backoff{Min: 40 * ms, Max: 80 * ms, Jitter: true}
	for i, d := range []time.Duration{40 * ms, 80 * ms, 80 * ms} {
		if got := j.Next(); got < d/2 || got > d {
			t.Fatalf("jittered pause %d: %v, want within [%v, %v]", i, got, d/2, d)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (&Backoff{Min: time.Hour, Max: time.Hour}).Wait(ctx); err != context.Canceled {
		t.Fatalf("a wait whose context ended: %v, want context.Canceled", err)
	}
}
