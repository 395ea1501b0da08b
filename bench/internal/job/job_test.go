package job

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/bench/internal/job.") }

// TestParseEvent decodes what slog's JSON handler (log.format = "json")
// really writes, and refuses what it does not.
func TestParseEvent(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("dataset protected", "dataset", "ckpt.3", "sent", int64(3<<30), "restored_here", true)
	before := time.Now()
	ev, ok := ParseEvent(buf.Bytes())
	if !ok {
		t.Fatalf("ParseEvent(%q) failed", buf.String())
	}
	if !ev.Is("dataset protected", "ckpt.3") || ev.Is("dataset protected", "ckpt.30") || ev.Level != "INFO" {
		t.Fatalf("event %+v", ev)
	}
	if ev.Num("sent") != 3<<30 || !ev.Flag("restored_here") || ev.Str("sent") != "" {
		t.Fatalf("attributes %+v", ev.Attrs)
	}
	if d := before.Sub(ev.Time); d < 0 || d > time.Minute {
		t.Fatalf("time %v, now %v", ev.Time, before)
	}
	for _, bad := range []string{"", "plain text", `{"msg":"no time"}`, `{"time":"yesterday","msg":"x"}`, `{"time":`, `[1,2]`} {
		if _, ok := ParseEvent([]byte(bad)); ok {
			t.Errorf("ParseEvent(%q) accepted", bad)
		}
	}
}

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"time":"2026-01-02T03:04:05.123456789Z","level":"INFO","msg":"dataset complete","dataset":"ckpt.1","bytes":1073741824}`))
	f.Add([]byte(`{"time":"2026-01-02T03:04:05Z","msg":7,"dataset":["x"],"lost":[1,2]}`))
	f.Add([]byte(`fuse: warning`))
	f.Add([]byte(`{"time":null}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, ok := ParseEvent(line)
		if !ok {
			return
		}
		if ev.Time.IsZero() && !bytes.Contains(line, []byte("0001-01-01")) {
			t.Fatalf("accepted %q with a zero time", line)
		}
		// Accessors never panic whatever the attribute types.
		ev.Str("dataset")
		ev.Num("bytes")
		ev.Flag("restored_here")
		ev.Is("dataset complete", "ckpt.1")
	})
}

// TestLogWatch: a wait sees lines that arrive later, stops at a failure
// line, and ends when the log does.
func TestLogWatch(t *testing.T) {
	r, w := io.Pipe()
	lw := NewLog("node 0", nil)
	go lw.Consume(r)
	line := func(msg, ds string) {
		var b bytes.Buffer
		slog.New(slog.NewJSONHandler(&b, nil)).Info(msg, "dataset", ds)
		w.Write(b.Bytes())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := lw.Wait(ctx, IsEvent("dataset protected", "ckpt.2"), OutcomeOf("ckpt.2"))
		got <- err
	}()
	line("dataset protected", "ckpt.1")
	w.Write([]byte("not json\n"))
	line("dataset protected", "ckpt.2")
	if err := <-got; err != nil {
		t.Fatalf("wait: %v", err)
	}
	line("dataset degraded: left without redundancy", "ckpt.3")
	if _, err := lw.Wait(ctx, IsEvent("dataset protected", "ckpt.3"), OutcomeOf("ckpt.3")); err == nil {
		t.Fatal("wait did not stop at the degraded line")
	}
	w.Close()
	if _, err := lw.Wait(ctx, IsEvent("dataset protected", "ckpt.4"), nil); !errors.Is(err, ErrExited) {
		t.Fatalf("wait after EOF: %v, want ErrExited", err)
	}
	if n := len(lw.All(func(e Event) bool { return true })); n != 3 {
		t.Fatalf("%d events kept, want 3 (the plain line is not one)", n)
	}
	if tail := lw.Tail(2); !bytes.Contains([]byte(tail), []byte("ckpt.3")) {
		t.Fatalf("tail %q", tail)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "256MiB": 256 << 20, "64 KiB": 64 << 10, "4096": 4096, "10B": 10, "0": 0} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1GB", "-1MiB", "1.5GiB", "99999999999GiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestParseKB(t *testing.T) {
	if n, err := ParseKB("    2048 kB"); err != nil || n != 2<<20 {
		t.Fatalf("parseKB: %d, %v", n, err)
	}
	for _, bad := range []string{"", "12", "12 MB", "x kB", "-1 kB"} {
		if _, err := ParseKB(bad); err == nil {
			t.Errorf("ParseKB(%q) accepted", bad)
		}
	}
}

func TestParseStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (scr fs) x) S 1 4242 4242 0 -1 4194560 100 0 7 0 250 50 0 0 20 0 12 0 100 0 0\n"
	if u, err := ParseStat(line); err != nil || u.CPU != 3*time.Second || u.Faults != 107 {
		t.Fatalf("parseStat: %+v, %v; want 3s and 107 faults", u, err)
	}
	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc")
	}
	u, err := ParseStat(string(self))
	if err != nil || u.Faults == 0 {
		t.Fatalf("own /proc/self/stat: %+v, %v", u, err)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3", "1 (x) S 1 2 3 4 5 6 7 8 9 10 -1 5 0", "1 (x) S 1 2 3 4 5 6 x 8 9 10 11 5 0"} {
		if _, err := ParseStat(bad); err == nil {
			t.Errorf("ParseStat(%q) accepted", bad)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{1 << 30: "1 GiB", 3 << 29: "1.5 GiB", 256 << 20: "256 MiB", 1536: "1.5 KiB", 12: "12 B"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	if got := FormatSpread([]time.Duration{3 * time.Second, time.Second, 2 * time.Second}); got != "2.00 s [1.00–3.00]" {
		t.Errorf("FormatSpread = %q", got)
	}
	if FormatSpread(nil) != "–" || FormatRate(1<<30, 0) != "–" || FormatRate(1<<30, 2*time.Second) != "0.50 GiB/s" {
		t.Error("FormatSpread of nothing, or FormatRate")
	}
}

// TestParseMetrics reads an exposition as a daemon serves it, and sums and
// groups its series by label.
func TestParseMetrics(t *testing.T) {
	const text = `# HELP scrfs_peer_requests_total Requests.
# TYPE scrfs_peer_requests_total counter
scrfs_peer_requests_total{direction="sent",kind="share"} 3
scrfs_peer_requests_total{direction="sent",kind="record"} 4
scrfs_peer_requests_total{direction="received",kind="share"} 5
# TYPE scrfs_namespace_received_bytes_total counter
scrfs_namespace_received_bytes_total 1.073741824e+09
# TYPE scrfs_fuse_op_duration_seconds histogram
scrfs_fuse_op_duration_seconds_bucket{op="read",le="+Inf"} 2
scrfs_fuse_op_duration_seconds_sum{op="read"} 0.5
scrfs_fuse_op_duration_seconds_count{op="read"} 2
`
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("scrfs_namespace_received_bytes_total"); got != 1<<30 {
		t.Errorf("received = %v", got)
	}
	if got := m.Sum("scrfs_peer_requests_total"); got != 12 {
		t.Errorf("all requests = %v, want 12", got)
	}
	if got := m.Sum("scrfs_peer_requests_total", "direction", "sent"); got != 7 {
		t.Errorf("sent = %v, want 7", got)
	}
	if got := m.Sum("scrfs_peer_requests_total", "direction", "sent", "kind", "share"); got != 3 {
		t.Errorf("sent shares = %v, want 3", got)
	}
	if got := m.Sum("nosuch"); got != 0 {
		t.Errorf("missing metric sums to %v", got)
	}
	if _, ok := m["scrfs_fuse_op_duration_seconds"]; ok {
		t.Error("a histogram was kept")
	}
	by := m.By("scrfs_peer_requests_total", "kind", "direction", "sent")
	if len(by) != 2 || by["share"] != 3 || by["record"] != 4 {
		t.Errorf("sent by kind = %v", by)
	}
	later := map[string]float64{"share": 7, "record": 4, "began": 1}
	if d := Diff(by, later); len(d) != 2 || d["share"] != 4 || d["began"] != 1 {
		t.Errorf("Diff = %v", d)
	}
	if got := FormatTop(later, 2, 0.5); got != "share 3.5, record 2" {
		t.Errorf("FormatTop = %q", got)
	}
	if _, err := ParseMetrics(strings.NewReader("scrfs_x{ 1\n")); err == nil {
		t.Error("a broken exposition parsed")
	}
}
