package peernet_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/internal/loopback"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/peernet"
	"github.com/scrfs/scrfs/peer"
)

func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/jobnet", "scrfs/peer") }

var errGone = errors.New("gone")

// TestOverPeer runs a Mux over two real peer nodes on loopback TCP: answers,
// a sentinel error that keeps its identity, and a stream.
func TestOverPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addrs := freeAddrs(t, 2)
	codes := []jobnet.Code{{Name: "gone", Err: errGone}}
	var nodes []*peer.Node
	var protos []*jobnet.Protocol
	for i := range 2 {
		m := jobnet.NewMux(i, codes...)
		p := m.Protocol("test")
		jobnet.Handle(p, "hello", func(ctx context.Context, from int, req string) (any, error) {
			if req == "gone" {
				return nil, fmt.Errorf("asked for %q: %w", req, errGone)
			}
			return fmt.Sprintf("%d says hello to %d", i, from), nil
		})
		n, err := peer.Start(ctx, peer.Config{Job: "t", Self: i, Addrs: addrs,
			Secret: []byte("0123456789abcdef0123"), Handlers: peernet.Handlers(m)})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		m.Attach(peernet.Transport(n))
		nodes, protos = append(nodes, n), append(protos, p)
	}
	var got string
	if err := protos[0].Call(ctx, 1, "hello", "hi", &got); err != nil || got != "1 says hello to 0" {
		t.Fatalf("answer %q, %v", got, err)
	}
	err := protos[0].Call(ctx, 1, "hello", "gone", nil)
	if !errors.Is(err, errGone) || !jobnet.IsRemote(err) {
		t.Fatalf("remote sentinel: %v", err)
	}
	s, err := protos[0].OpenStream(ctx, 1, "bulk")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := protos[1].AcceptStream(ctx, 0, "bulk")
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

// freeAddrs returns n distinct addresses on 127.0.0.1 nothing listens on.
func freeAddrs(t *testing.T, n int) []string {
	// Below the ephemeral range (loopback.FreePort): a port the kernel
	// hands out could be some connection's source port by the time the
	// node listens on it ("address already in use", seen here).
	var addrs []string
	for len(addrs) < n {
		port, err := loopback.FreePort(1)
		if err != nil {
			t.Fatal(err)
		}
		if a := net.JoinHostPort(loopback.IP(0), strconv.Itoa(port)); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// TestFanoutOverPeerLinks: over real peer nodes, which link only to the
// nodes they call, the first fan-out already travels along the tree: each
// node dials the nodes it passes the request on to and waits for that
// first dial, so node 0 sends one hop per part of the tree and links to
// those parts' first nodes only. A node that is not there costs its relay
// one failed dial: the fan-out goes on, and says which node was not
// reached.
func TestFanoutOverPeerLinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const size, width, absent = 12, 3, 7
	addrs := freeAddrs(t, size) // node absent's address stays closed
	var protos []*jobnet.Protocol
	var nodes []*peer.Node
	var regs []*prometheus.Registry
	for i := range size {
		m := jobnet.NewMux(i)
		m.SetWidth(width)
		p := m.Protocol("test")
		jobnet.Handle(p, "echo", func(ctx context.Context, from int, req string) (any, error) {
			return fmt.Sprintf("%d heard %s from %d", i, req, from), nil
		})
		reg := prometheus.NewRegistry()
		if i == absent {
			protos, nodes, regs = append(protos, p), append(nodes, nil), append(regs, reg)
			continue
		}
		n, err := peer.Start(ctx, peer.Config{Job: "t", Self: i, Addrs: addrs, Registerer: reg,
			Secret: []byte("0123456789abcdef0123"), Handlers: peernet.Handlers(m)})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		m.Attach(peernet.Transport(n))
		protos, nodes, regs = append(protos, p), append(nodes, n), append(regs, reg)
	}
	all := make([]int, 0, size)
	for i := range size {
		if i != absent {
			all = append(all, i)
		}
	}
	for n, r := range protos[0].Fanout(ctx, all, "echo", "hi") {
		var got string
		if err := r.Decode(&got); err != nil || got != fmt.Sprintf("%d heard hi from 0", n) {
			t.Fatalf("node %d: %q %v", n, got, err)
		}
	}
	hops := testutil.Counter(t, regs[0], "scrfs_peer_requests_total", map[string]string{"kind": "jobnet.fanout:test.echo", "direction": "sent"})
	if hops != width {
		t.Errorf("node 0 sent %v hops for a fan-out to %d nodes, want %d (one per part)", hops, len(all), width)
	}
	if links := nodes[0].Links(); len(links) != width {
		t.Errorf("node 0 linked to %d nodes (%v), want the %d parts' first nodes", len(links), links, width)
	}

	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	replies := protos[0].Fanout(short, append(all, absent), "echo", "again")
	if err := replies[absent].Err; !errors.Is(err, jobnet.ErrUnreached) {
		t.Fatalf("absent node %d: %v, want unreached", absent, err)
	}
	for _, n := range all {
		if err := replies[n].Err; err != nil {
			t.Errorf("node %d: %v", n, err)
		}
	}
}
