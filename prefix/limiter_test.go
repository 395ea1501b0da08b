package prefix

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock whose sleeps advance it instantly.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// TestLimiterRate drives the limiter with a fake clock: moving 10 MB at
// 5 MB/s in 1 MiB requests takes 2 s ± 20 % of fake time.
func TestLimiterRate(t *testing.T) {
	for _, req := range []int{4 << 10, 1 << 20, 8 << 20} {
		clk := &fakeClock{now: time.Unix(1000, 0)}
		l := newLimiter(5e6, clk.Now, clk.Sleep)
		start := clk.Now()
		var moved int64
		for moved < 10e6 {
			_, err := l.Wait(context.Background(), req)
			must(t, err)
			moved += int64(req)
		}
		took := clk.Now().Sub(start).Seconds()
		rate := float64(moved) / took
		if math.Abs(rate-5e6)/5e6 > 0.2 {
			t.Errorf("requests of %d: %.0f B/s over %.2f s, want 5e6 ± 20%%", req, rate, took)
		}
	}
}

// TestLimiterIdleBurst: idle time does not save up more than the burst.
func TestLimiterIdleBurst(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	l := newLimiter(1e6, clk.Now, clk.Sleep)
	clk.Sleep(context.Background(), time.Hour)
	d, err := l.Wait(context.Background(), 1e6)
	must(t, err)
	// 1 MB at 1 MB/s with 0.1 s of burst saved: 0.9 s.
	if d < 850*time.Millisecond || d > 950*time.Millisecond {
		t.Errorf("waited %v after an idle hour, want ~0.9 s", d)
	}
}

// TestLimiterRealClock runs four streams against the real clock. Only the
// upper bound on the rate is asserted — sleeping longer than asked (a busy
// machine) lowers the rate but can never raise it — so this cannot flake.
func TestLimiterRealClock(t *testing.T) {
	const rate = 8 << 20
	total := int64(4 << 20)
	if !testing.Short() {
		total = 8 << 20 // ~1 s
	}
	l := NewLimiter(rate)
	var wg sync.WaitGroup
	start := time.Now()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for moved := int64(0); moved < total/4; moved += 256 << 10 {
				if _, err := l.Wait(context.Background(), 256<<10); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	got := float64(total) / took
	t.Logf("%d bytes in %.3f s: %.0f B/s for a limit of %d", total, took, got, rate)
	// The burst (0.1 s worth) is free; beyond it the limit holds.
	if minTook := (float64(total) - 0.1*rate) / rate; took < minTook*0.999 {
		t.Errorf("moved %d bytes in %.3f s, the limit allows no less than %.3f s", total, took, minTook)
	}
}

func TestLimiterCancel(t *testing.T) {
	l := NewLimiter(1000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Wait(ctx, 1e6); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestLimiterUnlimited(t *testing.T) {
	for _, l := range []*Limiter{nil, NewLimiter(0), NewLimiter(-5)} {
		if d, err := l.Wait(context.Background(), 1<<30); d != 0 || err != nil {
			t.Errorf("unlimited limiter waited %v, %v", d, err)
		}
	}
}

// TestLimiterStep: an unlimited stream moves its whole buffer per call; a
// throttled one a burst's worth (never less than minLimiterStep), so its
// progress moves while it copies.
func TestLimiterStep(t *testing.T) {
	var none *Limiter
	for _, c := range []struct {
		l    *Limiter
		n    int
		want int
	}{
		{none, 4 << 20, 4 << 20},
		{NewLimiter(0), 4 << 20, 4 << 20},
		{NewLimiter(100 << 20), 4 << 20, 4 << 20}, // a burst is 10 MiB
		{NewLimiter(10 << 20), 4 << 20, 1 << 20},
		{NewLimiter(64 << 10), 4 << 20, minLimiterStep},
		{NewLimiter(64 << 10), 4 << 10, 4 << 10},
	} {
		if got := c.l.Step(c.n); got != c.want {
			t.Errorf("Step(%d) of a limiter of rate %v = %d, want %d", c.n, c.l, got, c.want)
		}
	}
}
