package peer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/internal/testutil"
)

func TestCallRoundTrip(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	nodes[1].Handle("echo", func(_ context.Context, from int, req []byte) ([]byte, error) {
		return fmt.Appendf(nil, "from %d: %s", from, req), nil
	})
	resp, err := nodes[0].Call(ctxTimeout(t, 10*time.Second), 1, "echo", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(resp), "from 0: hello"; got != want {
		t.Fatalf("response %q, want %q", got, want)
	}
	// An empty request and an empty response are fine.
	nodes[1].Handle("empty", func(context.Context, int, []byte) ([]byte, error) { return nil, nil })
	resp, err = nodes[0].Call(ctxTimeout(t, 10*time.Second), 1, "empty", nil)
	if err != nil || len(resp) != 0 {
		t.Fatalf("empty call: %q, %v", resp, err)
	}
	// The link stays: one up link to node 1, with a measured RTT soon.
	links := nodes[0].Links()
	if len(links) != 1 || links[0].Peer != 1 || !links[0].Up {
		t.Fatalf("links after call: %+v", links)
	}
	if got := metricValue(t, nodes[0].reg, "scrfs_peer_sent_bytes_total", "1"); got <= 0 {
		t.Errorf("sent bytes to node 1 = %v, want > 0", got)
	}
	if got := metricValue(t, nodes[1].reg, "scrfs_peer_received_bytes_total", "0"); got <= 0 {
		t.Errorf("received bytes from node 0 = %v, want > 0", got)
	}
	if got := metricValue(t, nodes[0].reg, "scrfs_peer_link_up", "1"); got != 1 {
		t.Errorf("link_up{peer=1} = %v, want 1", got)
	}
	// Two requests left node 0 and reached node 1, one of each kind; a
	// kind node 1 has no handler for is counted as unknown.
	if _, err := nodes[0].Call(ctxTimeout(t, 10*time.Second), 1, "nosuch", nil); err == nil {
		t.Fatal("call of a kind without a handler succeeded")
	}
	for _, c := range []struct {
		n               int
		kind, direction string
		want            float64
	}{{0, "echo", "sent", 1}, {0, "empty", "sent", 1}, {0, "nosuch", "sent", 1}, {1, "echo", "received", 1},
		{1, "empty", "received", 1}, {1, "unknown", "received", 1}, {1, "nosuch", "received", 0}, {1, "echo", "sent", 0}} {
		if got := requests(t, nodes[c.n].reg, c.kind, c.direction); got != c.want {
			t.Errorf("node %d: scrfs_peer_requests_total{kind=%q,direction=%q} = %v, want %v", c.n, c.kind, c.direction, got, c.want)
		}
	}
}

// requests returns scrfs_peer_requests_total{kind, direction} of reg (0
// when the series does not exist).
func requests(t *testing.T, reg *prometheus.Registry, kind, direction string) float64 {
	return testutil.Counter(t, reg, "scrfs_peer_requests_total", map[string]string{"kind": kind, "direction": direction})
}

func TestCallConcurrent(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 3, nil)
	// "gather" only returns once 4 handlers run at the same time, so it
	// deadlocks (and the calls time out) if handlers are serialised.
	var running atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	nodes[1].Handle("gather", func(ctx context.Context, from int, req []byte) ([]byte, error) {
		if running.Add(1) == 4 {
			once.Do(func() { close(all) })
		}
		select {
		case <-all:
			return req, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	nodes[1].Handle("sum", func(_ context.Context, from int, req []byte) ([]byte, error) {
		var s byte
		for _, b := range req {
			s += b
		}
		return []byte{s, byte(from)}, nil
	})
	ctx := ctxTimeout(t, 20*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 4 {
		wg.Go(func() {
			from := []int{0, 2}[i%2]
			resp, err := nodes[from].Call(ctx, 1, "gather", []byte{byte(i)})
			if err == nil && (len(resp) != 1 || resp[0] != byte(i)) {
				err = fmt.Errorf("gather %d: response %v", i, resp)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	sizes := []int{0, 1, 100, 64 << 10, 1 << 20}
	for i := range 40 {
		wg.Go(func() {
			from := []int{0, 2}[i%2]
			req := make([]byte, sizes[i%len(sizes)])
			pattern(req, uint64(i))
			var want byte
			for _, b := range req {
				want += b
			}
			resp, err := nodes[from].Call(ctx, 1, "sum", req)
			if err == nil && (len(resp) != 2 || resp[0] != want || int(resp[1]) != from) {
				err = fmt.Errorf("sum %d from %d: response %v, want [%d %d]", i, from, resp, want, from)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCallHandlerError(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	nodes[1].Handle("fail", func(context.Context, int, []byte) ([]byte, error) {
		return nil, errors.New("cache full")
	})
	ctx := ctxTimeout(t, 10*time.Second)
	_, err := nodes[0].Call(ctx, 1, "fail", nil)
	var re *RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T), want *RemoteError", err, err)
	}
	if re.Msg != "cache full" || re.Peer != 1 || re.Kind != "fail" {
		t.Fatalf("remote error %+v", re)
	}
	if errors.Is(err, ErrNoHandler) {
		t.Fatalf("handler error matches ErrNoHandler")
	}
	_, err = nodes[0].Call(ctx, 1, "nobody", nil)
	if !errors.Is(err, ErrNoHandler) {
		t.Fatalf("unknown kind: %v, want ErrNoHandler", err)
	}
	// Removing a handler makes its kind unknown.
	nodes[1].Handle("fail", nil)
	if _, err = nodes[0].Call(ctx, 1, "fail", nil); !errors.Is(err, ErrNoHandler) {
		t.Fatalf("removed handler: %v, want ErrNoHandler", err)
	}
	// A request over MaxFrame is refused locally; one of a bad peer index too.
	if _, err = nodes[0].Call(ctx, 1, "x", make([]byte, DefaultMaxFrame)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("huge request: %v, want ErrFrameTooLarge", err)
	}
	for _, to := range []int{-1, 0, 2} {
		if _, err = nodes[0].Call(ctx, to, "x", nil); !errors.Is(err, ErrUnknownPeer) {
			t.Fatalf("call node %d: %v, want ErrUnknownPeer", to, err)
		}
	}
}

// A caller giving up cancels the handler's ctx on the peer.
func TestCallCancelReachesHandler(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	started := make(chan struct{})
	cancelled := make(chan error, 1)
	nodes[1].Handle("block", func(ctx context.Context, _ int, _ []byte) ([]byte, error) {
		close(started)
		<-ctx.Done()
		cancelled <- ctx.Err()
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := nodes[0].Call(ctx, 1, "block", nil)
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("call error %v, want context.Canceled", err)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("handler ctx error %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler ctx not cancelled after the caller gave up")
	}
}

// Call waits for a link that is down, and gives up when its ctx ends.
func TestCallWaitsForPeer(t *testing.T) {
	checkLeaks(t)
	// Node 1 does not exist yet: its address is a port nobody listens on.
	cfg := testConfig(0, 2)
	n0 := startNode(t, cfg)
	ln := startNode(t, testConfig(1, 2)) // reserve an address, then free it
	addr := ln.Addr().String()
	_ = ln.Close()
	if err := n0.SetAddr(1, addr); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := n0.Call(ctxTimeout(t, 300*time.Millisecond), 1, "x", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call to absent node: %v, want DeadlineExceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("call took %v to honour a 300ms ctx", time.Since(start))
	}
	// Now node 1 comes up on that address, and a pending Call gets through.
	done := make(chan error, 1)
	go func() {
		_, err := n0.Call(ctxTimeout(t, 20*time.Second), 1, "ping", nil)
		done <- err
	}()
	c1 := testConfig(1, 2)
	c1.Addrs[1] = addr
	c1.Addrs[0] = n0.Addr().String()
	c1.Handlers = map[string]Handler{"ping": func(context.Context, int, []byte) ([]byte, error) { return nil, nil }}
	startNode(t, c1)
	if err := <-done; err != nil {
		t.Fatalf("call once node 1 is up: %v", err)
	}
}

// More slow handlers than a link runs at once, outliving the idle limit,
// neither kill the link nor lose calls: callers queue for a slot, and the
// serving side keeps answering heartbeats.
func TestSlowHandlersKeepLinkUp(t *testing.T) {
	checkLeaks(t)
	release := make(chan struct{})
	var running atomic.Int32
	nodes := startCluster(t, 2, func(i int, c *Config) {
		c.Heartbeat = 50 * time.Millisecond
		c.IOTimeout = 500 * time.Millisecond // idle limit 500ms
		c.Handlers = map[string]Handler{"slow": func(ctx context.Context, _ int, req []byte) ([]byte, error) {
			running.Add(1)
			defer running.Add(-1)
			select {
			case <-release:
				return req, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}
	})
	ev := linkEvents(nodes[0])
	if err := nodes[0].WaitUp(ctxTimeout(t, 10*time.Second), []int{1}); err != nil {
		t.Fatal(err)
	}
	waitLink(t, ev, 1, true)
	const calls = maxInFlight + 8
	ctx := ctxTimeout(t, 30*time.Second)
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			resp, err := nodes[0].Call(ctx, 1, "slow", []byte{byte(i)})
			if err == nil && (len(resp) != 1 || resp[0] != byte(i)) {
				err = fmt.Errorf("call %d: response %v", i, resp)
			}
			errs <- err
		}()
	}
	testutil.Eventually(t, 10*time.Second, "every handler in flight", func() bool { return running.Load() == maxInFlight })
	// Hold the handlers past two idle limits: the link must stay up.
	select {
	case s := <-ev:
		t.Fatalf("link changed while handlers were slow: %+v", s)
	case <-time.After(time.Second):
	}
	if got := running.Load(); got != maxInFlight {
		t.Fatalf("%d handlers running, want the in-flight limit %d", got, maxInFlight)
	}
	close(release)
	for range calls {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
