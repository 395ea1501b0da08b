package jobnet_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/peer"
)

func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/jobnet") }

var errGone = errors.New("gone")

// TestOverPeer runs a Mux over two real peer nodes on loopback TCP: answers,
// a sentinel error that keeps its identity, and a stream.
func TestOverPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addrs := []string{freeAddr(t), freeAddr(t)}
	codes := []jobnet.Code{{Name: "gone", Err: errGone}}
	var nodes []*peer.Node
	var muxes []*jobnet.Mux
	for i := range 2 {
		m := jobnet.NewMux(i, codes...)
		jobnet.Handle(m, "hello", func(ctx context.Context, from int, req string) (any, error) {
			if req == "gone" {
				return nil, fmt.Errorf("asked for %q: %w", req, errGone)
			}
			return fmt.Sprintf("%d says hello to %d", i, from), nil
		})
		n, err := peer.Start(ctx, peer.Config{Job: "t", Self: i, Addrs: addrs,
			Secret: []byte("0123456789abcdef0123"), Handlers: jobnet.PeerHandlers(m, m.Kinds())})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		m.Attach(jobnet.OverPeer(n))
		nodes, muxes = append(nodes, n), append(muxes, m)
	}
	var got string
	if err := muxes[0].Call(ctx, 1, "hello", "hi", &got); err != nil || got != "1 says hello to 0" {
		t.Fatalf("answer %q, %v", got, err)
	}
	err := muxes[0].Call(ctx, 1, "hello", "gone", nil)
	if !errors.Is(err, errGone) || !jobnet.IsRemote(err) {
		t.Fatalf("remote sentinel: %v", err)
	}
	s, err := muxes[0].OpenStream(ctx, 1, "bulk")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := muxes[1].AcceptStream(ctx, 0, "bulk")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := s.Send(ctx, []byte("payload")); err != nil {
		t.Fatal(err)
	}
	if b, err := r.Recv(ctx, nil); err != nil || string(b) != "payload" {
		t.Fatalf("stream: %q %v", b, err)
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestFanoutOverPeerLinks: over real peer nodes, which link only to the
// nodes they have called, a fan-out reaches every node, and once the
// relays have linked to the nodes below them (a fan-out that finds no link
// makes them dial), the origin sends one hop per part of the tree and no
// more.
func TestFanoutOverPeerLinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const size, width = 12, 3
	addrs := make([]string, size)
	for i := range addrs {
		addrs[i] = freeAddr(t)
	}
	var nodes []*peer.Node
	var muxes []*jobnet.Mux
	var regs []*prometheus.Registry
	for i := range size {
		m := jobnet.NewMux(i)
		m.SetWidth(width)
		jobnet.Handle(m, "echo", func(ctx context.Context, from int, req string) (any, error) {
			return fmt.Sprintf("%d heard %s from %d", i, req, from), nil
		})
		reg := prometheus.NewRegistry()
		n, err := peer.Start(ctx, peer.Config{Job: "t", Self: i, Addrs: addrs, Registerer: reg,
			Secret: []byte("0123456789abcdef0123"), Handlers: jobnet.PeerHandlers(m, m.Kinds())})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		m.Attach(jobnet.OverPeer(n))
		nodes, muxes, regs = append(nodes, n), append(muxes, m), append(regs, reg)
	}
	all := make([]int, size)
	for i := range all {
		all[i] = i
	}
	sent := func() float64 {
		return testutil.Counter(t, regs[0], "scrfs_peer_requests_total", map[string]string{"kind": "jobnet.fanout:echo", "direction": "sent"})
	}
	fanout := func() {
		t.Helper()
		for n, r := range muxes[0].Fanout(ctx, all, "echo", "hi") {
			var got string
			if err := r.Decode(&got); err != nil || got != fmt.Sprintf("%d heard hi from 0", n) {
				t.Fatalf("node %d: %q %v", n, got, err)
			}
		}
	}
	// Node 0 links to the parts' first nodes in the first fan-out, they
	// to the nodes below them in the second.
	for range 2 {
		fanout()
		for _, n := range nodes {
			var linked []int
			for _, l := range n.Links() {
				linked = append(linked, l.Peer)
			}
			if err := n.WaitUp(ctx, linked); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := sent()
	fanout()
	if hops := sent() - before; hops != width {
		t.Fatalf("node 0 sent %v hops for a fan-out to %d nodes, want %d (one per part)", hops, size, width)
	}
}
