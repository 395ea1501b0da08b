package testutil

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	var n atomic.Int32
	if !Poll(10*time.Second, func() bool { return n.Add(1) == 5 }) {
		t.Fatal("a condition that comes true was not seen")
	}
	start := time.Now()
	if Poll(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds was reported held")
	}
	if took := time.Since(start); took < Scale(30*time.Millisecond) || took > 5*time.Second {
		t.Fatalf("a poll of 30 ms, scaled to %v, gave up after %v", Scale(30*time.Millisecond), took)
	}
	Eventually(t, 10*time.Second, "a condition that holds at once", func() bool { return true })
}

func TestParseScale(t *testing.T) {
	for v, want := range map[string]float64{"": 1, "1": 1, "2.5": 2.5, "0.5": 0.5} {
		if got, err := parseScale(v); err != nil || got != want {
			t.Errorf("%s=%q: %v, %v; want %v", ScaleEnv, v, got, err, want)
		}
	}
	for _, v := range []string{"0", "-1", "x", "NaN", "Inf"} {
		if got, err := parseScale(v); err == nil {
			t.Errorf("%s=%q: %v, want an error", ScaleEnv, v, got)
		}
	}
}
