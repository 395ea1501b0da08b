package peer

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// A flood of connections from one address (idle sockets that hold their
// handshake slot until IOTimeout, and garbage) neither keeps a node that
// starts meanwhile from linking within its dial timeout nor writes a line
// per connection: the log holds a few lines per interval and a summary.
func TestFloodFromOneAddress(t *testing.T) {
	checkLeaks(t)
	was := refusalEvery
	refusalEvery = 500 * time.Millisecond
	t.Cleanup(func() { refusalEvery = was })

	const floodConns = 2000
	const flooder = "127.0.0.99"
	srv := startNode(t, testConfig(0, 2))
	srv.Handle("ping", func(context.Context, int, []byte) ([]byte, error) { return []byte("pong"), nil })

	var (
		made    atomic.Int64
		mu      sync.Mutex
		holding []net.Conn // idle sockets, closed when the test ends
		wg      sync.WaitGroup
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range holding {
			c.Close()
		}
	})
	started := time.Now()
	for w := range 16 {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(flooder)}, Timeout: time.Second}
			for k := w; k < floodConns; k += 16 {
				c, err := d.Dial("tcp", srv.Addr().String())
				if err != nil {
					continue // the backlog is full: that is a flood too
				}
				made.Add(1)
				if k%2 == 0 {
					mu.Lock()
					holding = append(holding, c)
					mu.Unlock()
					continue
				}
				c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
				c.Close()
			}
		})
	}
	testutil.Eventually(t, 30*time.Second, "a quarter of the flood's connections made", func() bool { return made.Load() >= floodConns/4 })

	// A node starting in the middle of the flood links and calls within
	// its dial timeout, although the flood holds far more than the 64
	// handshake slots' worth of idle sockets.
	cfg := testConfig(1, 2)
	cfg.Addrs[0] = srv.Addr().String()
	cli := startNode(t, cfg)
	begin := time.Now()
	resp, err := cli.Call(ctxTimeout(t, cfg.DialTimeout), 0, "ping", nil)
	if err != nil || string(resp) != "pong" {
		t.Fatalf("call during the flood (after %d connections): %q, %v after %v", made.Load(), resp, err, time.Since(begin))
	}
	t.Logf("linked and called in %v during a flood of %d connections so far", time.Since(begin), made.Load())
	wg.Wait()
	flooded := time.Since(started)

	// The summary of what was held back comes within an interval.
	srv.log.wait(t, 2*refusalEvery+time.Second, "peer port:", "not logged one by one")
	srv.log.mu.Lock()
	var lines []string
	for _, l := range srv.log.lines {
		if strings.Contains(l, "dropped connection") || strings.Contains(l, "refused connection") || strings.Contains(l, "peer port:") {
			lines = append(lines, l)
		}
	}
	srv.log.mu.Unlock()
	// Per interval: a line per kind of refusal (busy, garbage, timeout)
	// and a summary.
	intervals := int(flooded/refusalEvery) + 3
	if limit := 4 * intervals; len(lines) > limit || len(lines) > floodConns/20 {
		t.Errorf("%d log lines about %d flood connections in %v (limit %d):\n%s", len(lines), made.Load(), flooded, limit, strings.Join(lines, "\n"))
	}
	if got := metricValue(t, srv.reg, "scrfs_peer_dropped_total", dropBusy); got < floodConns/4 {
		t.Errorf("dropped_total{reason=busy} = %v: the metric must still count every refusal", got)
	}
}

// The handshake slots bound connections per address and in all.
func TestHandshakeSlots(t *testing.T) {
	var s handshakeSlots
	for range maxHandshakesPerHost {
		if ok, why := s.acquire("a"); !ok {
			t.Fatal(why)
		}
	}
	if ok, why := s.acquire("a"); ok || !strings.Contains(why, "from a") {
		t.Fatalf("slot %d for one address: %v %q", maxHandshakesPerHost+1, ok, why)
	}
	hosts := 0
	for i := 0; ; i++ {
		ok, why := s.acquire(string(rune('b' + i)))
		if !ok {
			if !strings.Contains(why, "handshakes already in progress") {
				t.Fatalf("refused with %q", why)
			}
			break
		}
		hosts++
	}
	if s.total != maxHandshakes || hosts != maxHandshakes-maxHandshakesPerHost {
		t.Fatalf("total %d after %d other hosts", s.total, hosts)
	}
	s.release("a")
	if ok, _ := s.acquire("a"); !ok {
		t.Fatal("a released slot is not free again")
	}
}
