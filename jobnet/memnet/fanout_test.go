package memnet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/memnet"
)

// hops counts the fan-out hops each node sends and receives.
type hops struct {
	mu       sync.Mutex
	sent     map[int]int
	received map[int]int
}

func newHops() *hops { return &hops{sent: map[int]int{}, received: map[int]int{}} }

func (h *hops) count(from, to int, kind string) memnet.Drop {
	if jobnet.RequestKind(kind) != kind {
		h.mu.Lock()
		h.sent[from]++
		h.received[to]++
		h.mu.Unlock()
	}
	return memnet.Deliver
}

func everyNode(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func widths(ms []node, w int) {
	for _, m := range ms {
		m.mux.SetWidth(w)
	}
}

// TestFanoutAlongATree: every node answers, handlers see the origin as
// the caller, and no node sends more hops than the width or receives more
// than one.
func TestFanoutAlongATree(t *testing.T) {
	h := newHops()
	net := memnet.New(memnet.Faults{Call: h.count})
	const n, width = 23, 3
	ms := cluster(t, net, n)
	widths(ms, width)
	replies := ms[5].Fanout(context.Background(), everyNode(n), "echo", echo{Text: "hi"})
	if len(replies) != n {
		t.Fatalf("%d replies, want %d", len(replies), n)
	}
	for i := range n {
		var got echo
		if err := replies[i].Decode(&got); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if want := fmt.Sprintf("5→%d: hi", i); got.Text != want {
			t.Errorf("node %d answered %q, want %q", i, got.Text, want)
		}
	}
	for i := range n {
		if h.sent[i] > width || h.received[i] > 1 {
			t.Errorf("node %d sent %d hops and received %d (width %d)", i, h.sent[i], h.received[i], width)
		}
	}
	if h.received[5] != 0 {
		t.Errorf("the origin received %d hops", h.received[5])
	}
}

// TestFanoutAroundADownNode: a node whose link is down does not take the
// nodes below it along: they answer, it is reported unreached once the
// fan-out's context ends.
func TestFanoutAroundADownNode(t *testing.T) {
	net := memnet.New(memnet.Faults{})
	const n = 15
	ms := cluster(t, net, n)
	widths(ms, 2)
	net.Kill(1) // the first node of the origin's first part
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	replies := ms[0].Fanout(ctx, everyNode(n), "echo", echo{Text: "x"})
	for i := range n {
		err := replies[i].Decode(nil)
		if i == 1 {
			if !errors.Is(err, jobnet.ErrUnreached) || jobnet.IsRemote(err) {
				t.Errorf("the down node: %v, want ErrUnreached", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
}

// TestFanoutHopLostMidway: a hop whose answer is lost (its receiver may
// have passed the request on) is served again from the node above: every
// node answers, some twice.
func TestFanoutHopLostMidway(t *testing.T) {
	var dropped atomic.Bool
	net := memnet.New(memnet.Faults{Call: func(from, to int, kind string) memnet.Drop {
		if kind == "jobnet.fanout:"+proto+".echo" && from == 0 && dropped.CompareAndSwap(false, true) {
			return memnet.DropResponse
		}
		return memnet.Deliver
	}})
	const n = 12
	ms := cluster(t, net, n)
	widths(ms, 2)
	replies := ms[0].Fanout(context.Background(), everyNode(n), "echo", echo{Text: "x"})
	if !dropped.Load() {
		t.Fatal("no hop was dropped")
	}
	for i := range n {
		if err := replies[i].Decode(nil); err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
}

// TestFanoutKeepsSentinels: a handler's sentinel error survives the hops.
func TestFanoutKeepsSentinels(t *testing.T) {
	net := memnet.New(memnet.Faults{})
	ms := cluster(t, net, 9)
	widths(ms, 2)
	replies := ms[0].Fanout(context.Background(), []int{8, 4, 0}, "fail", echo{Text: "it"})
	for _, i := range []int{8, 4, 0} {
		err := replies[i].Decode(nil)
		if !errors.Is(err, errSentinel) || !jobnet.IsRemote(err) {
			t.Errorf("node %d: %v, want the sentinel as a remote error", i, err)
		}
	}
}

// TestFanoutDownNodeDeepInTheTree: a down node below another is not waited
// for inside the tree: every other node's reply arrives long before the
// fan-out's deadline, which only the down node's own reply waits for.
func TestFanoutDownNodeDeepInTheTree(t *testing.T) {
	net := memnet.New(memnet.Faults{})
	const n = 15
	ms := cluster(t, net, n)
	widths(ms, 2) // node 0 → 1 and 8; 8 → 9 and 12; 9 is below 8
	net.Kill(9)
	const deadline = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	var healthy time.Duration
	ms[0].FanoutEach(ctx, everyNode(n), "echo", echo{Text: "x"}, func(i int, r jobnet.Reply) {
		if i == 9 {
			if !errors.Is(r.Err, jobnet.ErrUnreached) {
				t.Errorf("the down node: %v", r.Err)
			}
			return
		}
		if r.Err != nil {
			t.Errorf("node %d: %v", i, r.Err)
		}
		healthy = max(healthy, time.Since(start))
	})
	if healthy > deadline/2 {
		t.Errorf("the last healthy node answered after %v: the tree waited for the down node", healthy)
	}
}
