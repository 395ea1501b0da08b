package peer

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/internal/testutil"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// logCapture is a slog.Handler that keeps every record's message so tests can
// wait for, and assert, the lines a human would read.
type logCapture struct {
	t    testing.TB
	name string

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line
}

func newLogCapture(t testing.TB, name string) *logCapture {
	return &logCapture{t: t, name: name, changed: make(chan struct{})}
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCapture) WithGroup(string) slog.Handler            { return c }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	c.mu.Lock()
	c.lines = append(c.lines, line)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	if testing.Verbose() {
		c.t.Logf("[%s] %s", c.name, line)
	}
	return nil
}

// find returns the first line containing every part.
func (c *logCapture) find(parts ...string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		ok := true
		for _, p := range parts {
			if !strings.Contains(l, p) {
				ok = false
				break
			}
		}
		if ok {
			return l, true
		}
	}
	return "", false
}

// wait blocks until a line containing every part is logged, or fails the
// test after d.
func (c *logCapture) wait(t testing.TB, d time.Duration, parts ...string) string {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ch := c.changed
		c.mu.Unlock()
		if l, ok := c.find(parts...); ok {
			return l
		}
		select {
		case <-ch:
		case <-deadline.C:
			c.mu.Lock()
			all := strings.Join(c.lines, "\n  ")
			c.mu.Unlock()
			t.Fatalf("[%s] no log line containing %q within %v; got:\n  %s", c.name, parts, d, all)
			return ""
		}
	}
}

// testNode is a started Node plus what tests inspect.
type testNode struct {
	*Node
	log *logCapture
	reg *prometheus.Registry
}

// testConfig is a fast-timeout config for node i of size nodes, on loopback
// address 127.0.0.(i+1) with an ephemeral port; other addresses are filled
// in by linkAll.
func testConfig(i, size int) Config {
	addrs := make([]string, size)
	addrs[i] = fmt.Sprintf("127.0.0.%d:0", i+1)
	return Config{
		Job:         "job-test",
		Self:        i,
		Addrs:       addrs,
		Secret:      testSecret,
		DialTimeout: 2 * time.Second,
		IOTimeout:   5 * time.Second,
		Heartbeat:   200 * time.Millisecond,
		MaxBackoff:  200 * time.Millisecond,
	}
}

// startNode starts a Node with cfg, a capturing logger and its own
// registry; it is closed at cleanup.
func startNode(t testing.TB, cfg Config) *testNode {
	t.Helper()
	tn := &testNode{log: newLogCapture(t, fmt.Sprintf("node%d", cfg.Self)), reg: prometheus.NewRegistry()}
	cfg.Logger = slog.New(tn.log)
	cfg.Registerer = tn.reg
	n, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start node %d: %v", cfg.Self, err)
	}
	tn.Node = n
	t.Cleanup(func() { _ = n.Close() })
	return tn
}

// startCluster starts size nodes and tells each every other's address.
// tweak, if not nil, adjusts each node's config first.
func startCluster(t testing.TB, size int, tweak func(i int, c *Config)) []*testNode {
	t.Helper()
	nodes := make([]*testNode, size)
	for i := range nodes {
		cfg := testConfig(i, size)
		if tweak != nil {
			tweak(i, &cfg)
		}
		nodes[i] = startNode(t, cfg)
	}
	linkAll(t, nodes)
	return nodes
}

// linkAll tells every node the current address of every other.
func linkAll(t testing.TB, nodes []*testNode) {
	t.Helper()
	for _, a := range nodes {
		for j, b := range nodes {
			if a == b || b == nil || a == nil {
				continue
			}
			if err := a.SetAddr(j, b.Addr().String()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkLeaks fails the test if goroutines started during it are still
// running shortly after its cleanups (registered later, so run earlier)
// closed every Node. Tests in this package do not run in parallel.
func checkLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		// Goroutines exit asynchronously after Close returns (timers,
		// net poller): the count is polled, a while.
		if !testutil.Poll(5*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Errorf("goroutine leak: %d running, %d before the test\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
	})
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// metricValue returns the value of the named metric with the given label
// value from a registry, or -1 when absent.
func metricValue(t testing.TB, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	v, ok := testutil.Metric(t, reg, name, func(labels map[string]string) bool {
		for _, l := range labels {
			if l == label {
				return true
			}
		}
		return false
	})
	if !ok {
		return -1
	}
	return v
}

// pattern fills b with bytes derived from seed, so receivers can check
// content without keeping a copy.
func pattern(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

func checkPattern(t testing.TB, got []byte, seed uint64, scratch []byte) {
	t.Helper()
	want := scratch[:len(got)]
	pattern(want, seed)
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("frame %d: content differs at byte %d of %d", seed, i, len(got))
	}
}

// TestMain also checks for goroutines left behind by the whole run, which
// catches leaks from tests that forgot checkLeaks.
func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/scrfs/peer.") }
