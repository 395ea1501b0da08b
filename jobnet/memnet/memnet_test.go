package memnet_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/memnet"
)

func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/jobnet") }

var errSentinel = errors.New("no such thing")

var codes = []jobnet.Code{{Name: "not_found", Err: errSentinel}}

type echo struct{ Text string }

// proto is the protocol the tests speak.
const proto = "test"

// node is one node of a test cluster: its Mux, and the test protocol on it.
type node struct {
	*jobnet.Protocol
	mux *jobnet.Mux
}

// cluster joins n nodes, each with a Mux whose test protocol serves
// "echo", "fail" and "block".
func cluster(t *testing.T, net *memnet.Network, n int) []node {
	t.Helper()
	var nodes []node
	for i := range n {
		m := jobnet.NewMux(i, codes...)
		p := m.Protocol(proto)
		jobnet.Handle(p, "echo", func(ctx context.Context, from int, req echo) (any, error) {
			return echo{Text: fmt.Sprintf("%d→%d: %s", from, i, req.Text)}, nil
		})
		jobnet.Handle(p, "fail", func(ctx context.Context, from int, req echo) (any, error) {
			return nil, fmt.Errorf("looked for %s: %w", req.Text, errSentinel)
		})
		jobnet.Handle(p, "block", func(ctx context.Context, from int, req echo) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		m.Attach(net.Join(i, m.Serve))
		nodes = append(nodes, node{Protocol: p, mux: m})
	}
	t.Cleanup(func() {
		for i := range n {
			net.Kill(i)
		}
	})
	return nodes
}

func TestCallAndLocalCall(t *testing.T) {
	ms := cluster(t, memnet.New(memnet.Faults{}), 3)
	ctx := context.Background()
	for _, to := range []int{0, 2} {
		var out echo
		if err := ms[0].Call(ctx, to, "echo", echo{Text: "hi"}, &out); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("0→%d: hi", to); out.Text != want {
			t.Fatalf("answer %q, want %q", out.Text, want)
		}
	}
}

func TestSentinelSurvivesTheNetwork(t *testing.T) {
	ms := cluster(t, memnet.New(memnet.Faults{}), 2)
	for _, to := range []int{0, 1} {
		err := ms[0].Call(context.Background(), to, "fail", echo{Text: "ckpt.1"}, nil)
		if !errors.Is(err, errSentinel) {
			t.Fatalf("to node %d: %v does not unwrap to the sentinel", to, err)
		}
		if !jobnet.IsRemote(err) {
			t.Fatalf("to node %d: %v is not a remote error", to, err)
		}
	}
	err := ms[0].Call(context.Background(), 1, "nonesuch", echo{}, nil)
	if !jobnet.IsRemote(err) || errors.Is(err, errSentinel) {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestCallWaitsForJoin(t *testing.T) {
	net := memnet.New(memnet.Faults{})
	ms := cluster(t, net, 2)
	net.Kill(1)
	done := make(chan error, 1)
	go func() { done <- ms[0].Call(context.Background(), 1, "echo", echo{Text: "later"}, nil) }()
	m1 := jobnet.NewMux(1)
	jobnet.Handle(m1.Protocol(proto), "echo", func(ctx context.Context, from int, req echo) (any, error) { return req, nil })
	m1.Attach(net.Join(1, m1.Serve))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	net.Kill(1)
	if err := ms[0].Call(ctx, 1, "echo", echo{}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call to a down node: %v", err)
	}
}

func TestKillMidCall(t *testing.T) {
	net := memnet.New(memnet.Faults{})
	m0 := jobnet.NewMux(0)
	p0 := m0.Protocol(proto)
	m0.Attach(net.Join(0, m0.Serve))
	defer net.Kill(0)
	started := make(chan struct{})
	m1 := jobnet.NewMux(1)
	jobnet.Handle(m1.Protocol(proto), "block", func(ctx context.Context, from int, req echo) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	m1.Attach(net.Join(1, m1.Serve))
	done := make(chan error, 1)
	go func() { done <- p0.Call(context.Background(), 1, "block", echo{}, nil) }()
	<-started
	net.Kill(1) // returns once the handler did: its context ended
	if err := <-done; !errors.Is(err, jobnet.ErrConnLost) {
		t.Fatalf("call to a killed node: %v", err)
	}
}

func TestDroppedCalls(t *testing.T) {
	var ran atomic.Int32
	var mode atomic.Int32
	net := memnet.New(memnet.Faults{Call: func(from, to int, kind string) memnet.Drop { return memnet.Drop(mode.Load()) }})
	m0 := jobnet.NewMux(0)
	p0 := m0.Protocol(proto)
	m0.Attach(net.Join(0, m0.Serve))
	m1 := jobnet.NewMux(1)
	jobnet.Handle(m1.Protocol(proto), "count", func(ctx context.Context, from int, req echo) (any, error) {
		ran.Add(1)
		return nil, nil
	})
	m1.Attach(net.Join(1, m1.Serve))
	defer net.Kill(0)
	defer net.Kill(1)
	for _, tc := range []struct {
		mode memnet.Drop
		runs int32
		lost bool
	}{{memnet.DropRequest, 0, true}, {memnet.DropResponse, 1, true}, {memnet.Deliver, 1, false}} {
		mode.Store(int32(tc.mode))
		ran.Store(0)
		err := p0.Call(context.Background(), 1, "count", echo{}, nil)
		if lost := errors.Is(err, jobnet.ErrConnLost); lost != tc.lost {
			t.Errorf("mode %d: err %v, want lost=%v", tc.mode, err, tc.lost)
		}
		if got := ran.Load(); got != tc.runs {
			t.Errorf("mode %d: handler ran %d times, want %d", tc.mode, got, tc.runs)
		}
	}
}

func TestStreamsKeepOrderAndBreakOnKill(t *testing.T) {
	net := memnet.New(memnet.Faults{StreamDelay: func(from, to int, id string) time.Duration {
		if id == proto+".slow" {
			return time.Millisecond
		}
		return 0
	}})
	ms := cluster(t, net, 2)
	ctx := context.Background()
	for _, id := range []string{"slow", "fast"} {
		// Opened before accepted, as a ring's nodes do.
		a, err := ms[0].OpenStream(ctx, 1, id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ms[1].AcceptStream(ctx, 0, id)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for i := range 20 {
				a.Send(ctx, []byte{byte(i)})
			}
			a.Close()
		}()
		for i := range 20 {
			m, err := b.Recv(ctx, nil)
			if err != nil || len(m) != 1 || m[0] != byte(i) {
				t.Fatalf("stream %s message %d: %v %v", id, i, m, err)
			}
		}
		if _, err := b.Recv(ctx, nil); !errors.Is(err, memnet.ErrBroken) {
			t.Fatalf("after the far end closed: %v", err)
		}
		b.Close()
	}
	a, err := ms[1].OpenStream(ctx, 0, "killed")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ms[0].AcceptStream(ctx, 1, "killed")
	if err != nil {
		t.Fatal(err)
	}
	recv := make(chan error, 1)
	go func() {
		_, err := b.Recv(ctx, nil)
		recv <- err
	}()
	net.Kill(1)
	if err := <-recv; !errors.Is(err, memnet.ErrBroken) {
		t.Fatalf("recv from a killed node: %v", err)
	}
	if err := a.Send(ctx, []byte("x")); err == nil {
		t.Fatal("send from a killed node succeeded")
	}
	b.Close()
}

func TestLinkEvents(t *testing.T) {
	net := memnet.New(memnet.Faults{})
	ms := cluster(t, net, 2)
	events := make(chan string, 4)
	ms[0].mux.OnLinkChange(func(peer int, up bool) { events <- fmt.Sprint(peer, up) })
	net.Kill(1)
	m := jobnet.NewMux(1)
	m.Attach(net.Join(1, m.Serve))
	for _, want := range []string{"1 false", "1 true"} {
		if got := <-events; got != want {
			t.Fatalf("event %q, want %q", got, want)
		}
	}
	if err := ms[0].mux.WaitUp(context.Background(), []int{0, 1}); err != nil {
		t.Fatal(err)
	}
}

// TestStreamToSelf: a node's two parts meet over an in-process pipe,
// without any transport.
func TestStreamToSelf(t *testing.T) {
	m := jobnet.NewMux(0).Protocol(proto)
	ctx := context.Background()
	a, err := m.OpenStream(ctx, 0, "self")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.AcceptStream(ctx, 0, "self")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(ctx, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Recv(ctx, nil); err != nil || string(got) != "hi" {
		t.Fatalf("recv %q, %v", got, err)
	}
	a.Close()
	if _, err := b.Recv(ctx, nil); err == nil {
		t.Fatal("recv after the other end closed succeeded")
	}
	b.Close()
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := m.AcceptStream(ctx2, 0, "never"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("accept of a stream nobody opens: %v", err)
	}
}
