package main

import (
	"strings"
	"testing"

	"github.com/scrfs/scrfs/control"
)

func TestFlushDetail(t *testing.T) {
	cases := []struct {
		f    control.Flush
		want string
	}{
		{control.Flush{State: "scheduled"}, "scheduled"},
		{control.Flush{State: "flushing", DoneBytes: 1 << 30, TotalBytes: 4 << 30, Rate: 100 << 20, ETA: 30},
			"flushing 25% (1.0 GiB of 4.0 GiB, 100.0 MiB/s, ETA 30s)"},
		{control.Flush{State: "flushing", DoneBytes: 0, TotalBytes: 10}, "flushing 0% (0 B of 10 B)"},
		{control.Flush{State: "flushing", TotalBytes: 2048, DoneBytes: 2048, Waiting: true},
			"this node's 2.0 KiB flushed, waiting for the other nodes"},
		{control.Flush{State: "flushed"}, "flushed"},
		{control.Flush{State: "flush-failed", Error: "node 2: no space left on device"}, "flush-failed: node 2: no space left on device"},
	}
	for _, c := range cases {
		if got := flushDetail(c.f); got != c.want {
			t.Errorf("flushDetail(%+v) = %q, want %q", c.f, got, c.want)
		}
	}
}

func TestProgressBar(t *testing.T) {
	for _, c := range []struct {
		done, total int64
		bar         string
	}{
		{0, 100, "[>         ]"},
		{45, 100, "[====>     ]"},
		{100, 100, "[==========]"},
		{5, 0, "[>         ]"},
	} {
		got := progressBar("ckpt.5", control.Flush{State: "flushing", DoneBytes: c.done, TotalBytes: c.total}, 10)
		if !strings.HasPrefix(got, "ckpt.5 "+c.bar+" ") {
			t.Errorf("%d/%d: %q, want the bar %s", c.done, c.total, got, c.bar)
		}
	}
}

// Plain output (a log file) gets a line per state change or 10% step, not
// one per poll.
func TestPlainKey(t *testing.T) {
	f := control.Flush{State: "flushing", DoneBytes: 11, TotalBytes: 100, Rate: 5}
	g := f
	g.DoneBytes, g.Rate = 19, 7
	if plainKey(f) != plainKey(g) {
		t.Error("a new line within the same 10% step")
	}
	g.DoneBytes = 20
	if plainKey(f) == plainKey(g) {
		t.Error("no new line at the next 10% step")
	}
	g = f
	g.Waiting = true
	if plainKey(f) == plainKey(g) {
		t.Error("no new line when this node's part is done")
	}
}

func TestFlushUsage(t *testing.T) {
	if _, _, code := runCLI(t, "flush", "a", "b"); code != exitUsage {
		t.Fatalf("two names: exit %d", code)
	}
	if _, errs, code := runCLI(t, "flush", "--control", t.TempDir(), "ckpt.1"); code != exitNoDaemon {
		t.Fatalf("no daemon: exit %d: %s", code, errs)
	}
}
