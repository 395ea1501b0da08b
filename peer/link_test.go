package peer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// linkEvents returns a channel fed by n's OnLinkChange hook.
func linkEvents(n *testNode) <-chan LinkStatus {
	ch := make(chan LinkStatus, 64)
	n.OnLinkChange(func(s LinkStatus) { ch <- s })
	return ch
}

// waitLink waits for an event about peer with the given Up state.
func waitLink(t *testing.T, ch <-chan LinkStatus, peer int, up bool) LinkStatus {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case s := <-ch:
			if s.Peer == peer && s.Up == up {
				return s
			}
		case <-timeout:
			t.Fatalf("no event: link to node %d up=%v", peer, up)
		}
	}
}

// A link goes down when its peer's Node closes, and comes back by itself
// when a new Node starts on the same address.
func TestLinkReconnect(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	ev := linkEvents(nodes[0])
	nodes[0].Connect([]int{1})
	if err := nodes[0].WaitUp(ctxTimeout(t, 10*time.Second), []int{1}); err != nil {
		t.Fatal(err)
	}
	first := waitLink(t, ev, 1, true)
	addr := nodes[1].Addr().String()
	if first.Addr != addr {
		t.Fatalf("link addr %s, want %s", first.Addr, addr)
	}

	_ = nodes[1].Close()
	down := waitLink(t, ev, 1, false)
	if down.LastError == "" || !down.Since.After(first.Since) {
		t.Fatalf("down status %+v", down)
	}
	if got := metricValue(t, nodes[0].reg, "scrfs_peer_link_up", "1"); got != 0 {
		t.Fatalf("link_up after peer closed = %v", got)
	}
	if l := nodes[0].Links(); len(l) != 1 || l[0].Up {
		t.Fatalf("links after peer closed: %+v", l)
	}

	cfg := testConfig(1, 2)
	cfg.Addrs[1] = addr
	cfg.Addrs[0] = nodes[0].Addr().String()
	cfg.Handlers = map[string]Handler{"who": func(context.Context, int, []byte) ([]byte, error) { return []byte("new"), nil }}
	startNode(t, cfg)
	up := waitLink(t, ev, 1, true)
	if up.Addr != addr {
		t.Fatalf("relinked to %s, want %s", up.Addr, addr)
	}
	resp, err := nodes[0].Call(ctxTimeout(t, 10*time.Second), 1, "who", nil)
	if err != nil || string(resp) != "new" {
		t.Fatalf("call after reconnect: %q, %v", resp, err)
	}
	if got := metricValue(t, nodes[0].reg, "scrfs_peer_reconnects_total", "1"); got != 1 {
		t.Fatalf("reconnects_total = %v, want 1", got)
	}
	// The heartbeat measures a round trip.
	testutil.Eventually(t, 10*time.Second, "an RTT measured", func() bool { return nodes[0].Links()[0].RTT != 0 })
}

// A node restarted on another address with the same index is found again:
// its first authenticated connection announces the new address.
func TestNodeMoves(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil) // node 1 on 127.0.0.2
	ev := linkEvents(nodes[0])
	nodes[0].Connect([]int{1})
	waitLink(t, ev, 1, true)
	oldAddr := nodes[1].Addr().String()
	_ = nodes[1].Close()
	waitLink(t, ev, 1, false)

	// The spare takes index 1 on 127.0.0.3 and dials node 0.
	cfg := testConfig(1, 2)
	cfg.Addrs[1] = "127.0.0.3:0"
	cfg.Addrs[0] = nodes[0].Addr().String()
	cfg.Handlers = map[string]Handler{"where": func(context.Context, int, []byte) ([]byte, error) { return []byte("127.0.0.3"), nil }}
	spare := startNode(t, cfg)
	newAddr := spare.Addr().String()
	spare.Connect([]int{0})

	nodes[0].log.wait(t, 10*time.Second, fmt.Sprintf("node 1 moved from %s to %s", oldAddr, newAddr))
	up := waitLink(t, ev, 1, true)
	if up.Addr != newAddr {
		t.Fatalf("link up at %s, want %s", up.Addr, newAddr)
	}
	if got := nodes[0].Addrs()[1]; got != newAddr {
		t.Fatalf("address table says %s, want %s", got, newAddr)
	}
	resp, err := nodes[0].Call(ctxTimeout(t, 10*time.Second), 1, "where", nil)
	if err != nil || string(resp) != "127.0.0.3" {
		t.Fatalf("call to the moved node: %q, %v", resp, err)
	}
}

func TestWaitUpTimeout(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 3, nil)
	_ = nodes[2].Close() // node 2 is gone
	if err := nodes[0].WaitUp(ctxTimeout(t, 10*time.Second), []int{1}); err != nil {
		t.Fatal(err)
	}
	err := nodes[0].WaitUp(ctxTimeout(t, 300*time.Millisecond), []int{1, 2})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitUp with node 2 gone: %v", err)
	}
	var ok bool
	for _, l := range nodes[0].Links() {
		if l.Peer == 2 && !l.Up && l.LastError != "" {
			ok = true
		}
		if l.Peer == 1 && !l.Up {
			t.Errorf("link to live node 1 down: %+v", l)
		}
	}
	if !ok {
		t.Fatalf("no failed link to node 2 in %+v", nodes[0].Links())
	}
	if err := nodes[0].WaitUp(ctxTimeout(t, time.Second), []int{0}); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("WaitUp on self: %v, want ErrUnknownPeer", err)
	}
}

// Close unblocks everything waiting on the Node.
func TestCloseUnblocks(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	blocked := make(chan struct{})
	nodes[1].Handle("block", func(ctx context.Context, _ int, _ []byte) ([]byte, error) {
		close(blocked)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	callErr, acceptErr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := nodes[0].Call(context.Background(), 1, "block", nil)
		callErr <- err
	}()
	go func() {
		_, err := nodes[0].AcceptStream(context.Background(), 1, "never")
		acceptErr <- err
	}()
	<-blocked
	// Node 1 closing cancels the running handler (Close waits for it) and
	// drops the link: the caller learns it lost the call.
	if err := nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	var re *RemoteError
	if err := <-callErr; !errors.Is(err, ErrConnLost) && !errors.As(err, &re) {
		t.Fatalf("call to a closing node: %v, want ErrConnLost or the cancelled handler's error", err)
	}
	_ = nodes[0].Close()
	if err := <-acceptErr; !errors.Is(err, ErrClosed) {
		t.Fatalf("AcceptStream on a closed node: %v, want ErrClosed", err)
	}
	if _, err := nodes[0].Call(context.Background(), 1, "x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call on a closed node: %v, want ErrClosed", err)
	}
	if _, err := nodes[0].OpenStream(context.Background(), 1, "x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("open stream on a closed node: %v, want ErrClosed", err)
	}
}

// TestPeerBackRedialsAtOnce: a link that has backed off far (the peer was
// down for a while) redials as soon as the peer, restarted, connects to us:
// it does not wait out its backoff.
func TestPeerBackRedialsAtOnce(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, func(i int, c *Config) { c.MaxBackoff = time.Minute })
	ev := linkEvents(nodes[0])
	nodes[0].Connect([]int{1})
	waitLink(t, ev, 1, true)
	addr := nodes[1].Addr().String()
	_ = nodes[1].Close()
	waitLink(t, ev, 1, false)
	// Let the backoff grow well beyond the wait below: 50 ms doubling for
	// 3 s reaches several seconds.
	time.Sleep(3 * time.Second) // builds up the backoff; nothing to await
	cfg := testConfig(1, 2)
	cfg.Addrs[1], cfg.Addrs[0] = addr, nodes[0].Addr().String()
	back := startNode(t, cfg)
	back.Connect([]int{0})
	if err := nodes[0].WaitUp(ctxTimeout(t, 2*time.Second), []int{1}); err != nil {
		t.Fatalf("our link to the restarted peer, which dialled us: %v", err)
	}
}

// Reach makes a link it does not have and waits for its first dial only:
// up for a live peer, down at once for a dead one, and down at once again
// once that link has been tried.
func TestReach(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	ctx := ctxTimeout(t, 10*time.Second)
	if !nodes[0].Reach(ctx, 1) {
		t.Fatal("live peer not reached")
	}
	if l := nodes[0].Links(); len(l) != 1 || !l[0].Up {
		t.Fatalf("links after Reach: %+v", l)
	}
	closed := nodes[1].Addr().String()
	_ = nodes[1].Close()
	dead := testConfig(0, 3)
	dead.Addrs[1] = closed        // the node that just closed
	dead.Addrs[2] = "127.0.0.1:1" // nothing ever listened there
	n := startNode(t, dead)
	for range 2 {
		if n.Reach(ctx, 1) || n.Reach(ctx, 2) {
			t.Fatal("a peer nobody serves was reported reached")
		}
	}
	if ctx.Err() != nil {
		t.Fatal("Reach waited for its context instead of the first dial")
	}
}
