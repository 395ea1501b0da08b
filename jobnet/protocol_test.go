package jobnet_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/memnet"
)

// TestProtocolsKeepApart: two protocols that name a request and a stream
// alike never take each other's: each node's "alpha" and "beta" both serve
// "echo", and both open stream "bulk" to the same node at once. On the
// wire the kinds are "alpha.echo" and "beta.echo", fan-outs' hops carry
// them whole, and a kind only one protocol has is unknown to the other.
func TestProtocolsKeepApart(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	net := memnet.New(memnet.Faults{Call: func(from, to int, kind string) memnet.Drop {
		mu.Lock()
		seen[kind] = true
		mu.Unlock()
		return memnet.Deliver
	}})
	names := []string{"alpha", "beta"}
	protos := map[string][]*jobnet.Protocol{}
	for i := range 3 {
		m := jobnet.NewMux(i)
		m.SetWidth(1) // node 0 → 1 → 2: the hop to 2 passes through 1
		for _, name := range names {
			p := m.Protocol(name)
			jobnet.Handle(p, "echo", func(ctx context.Context, from int, req string) (any, error) {
				return fmt.Sprintf("%s of node %d: %s", name, i, req), nil
			})
			protos[name] = append(protos[name], p)
		}
		jobnet.Handle(protos["alpha"][i], "only-alpha", func(ctx context.Context, from int, req string) (any, error) {
			return nil, nil
		})
		m.Attach(net.Join(i, m.Serve))
		defer net.Kill(i)
	}
	ctx := context.Background()
	for _, name := range names {
		p := protos[name][0]
		var got string
		if err := p.Call(ctx, 1, "echo", "hi", &got); err != nil || got != name+" of node 1: hi" {
			t.Errorf("%s's call: %q, %v", name, got, err)
		}
		for n, r := range p.Fanout(ctx, []int{1, 2}, "echo", "all") {
			if err := r.Decode(&got); err != nil || got != fmt.Sprintf("%s of node %d: all", name, n) {
				t.Errorf("%s's fan-out, node %d: %q, %v", name, n, got, err)
			}
		}
	}
	for _, kind := range []string{"alpha.echo", "beta.echo", "jobnet.fanout:alpha.echo", "jobnet.fanout:beta.echo"} {
		if !seen[kind] {
			t.Errorf("no request of kind %q on the wire (saw %v)", kind, seen)
		}
	}
	if err := protos["beta"][0].Call(ctx, 1, "only-alpha", "", nil); !jobnet.IsRemote(err) || !strings.Contains(err.Error(), `"beta.only-alpha"`) {
		t.Errorf("beta calling a kind only alpha has: %v", err)
	}

	var opened []jobnet.Stream
	for _, name := range names {
		s, err := protos[name][0].OpenStream(ctx, 1, "bulk")
		if err != nil {
			t.Fatalf("%s opens bulk: %v", name, err)
		}
		defer s.Close()
		if err := s.Send(ctx, []byte(name)); err != nil {
			t.Fatal(err)
		}
		opened = append(opened, s)
	}
	for _, name := range []string{"beta", "alpha"} {
		s, err := protos[name][1].AcceptStream(ctx, 0, "bulk")
		if err != nil {
			t.Fatalf("%s accepts bulk: %v", name, err)
		}
		defer s.Close()
		if got, err := s.Recv(ctx, nil); err != nil || string(got) != name {
			t.Errorf("%s's stream brought %q, %v", name, got, err)
		}
	}
}

// TestProtocolMisuse: a protocol name or a request kind registered twice,
// or not a name at all, panics at once, naming it.
func TestProtocolMisuse(t *testing.T) {
	handler := func(ctx context.Context, from int, req string) (any, error) { return nil, nil }
	for _, tc := range []struct {
		what, want string
		do         func(m *jobnet.Mux)
	}{
		{"protocol twice", `protocol "completion" registered twice`, func(m *jobnet.Mux) {
			m.Protocol("completion")
			m.Protocol("completion")
		}},
		{"kind twice", `request kind "completion.begin" registered twice`, func(m *jobnet.Mux) {
			p := m.Protocol("completion")
			jobnet.Handle(p, "begin", handler)
			jobnet.Handle(p, "begin", handler)
		}},
		{"raw handler over a decoding one", `request kind "completion.begin" registered twice`, func(m *jobnet.Mux) {
			p := m.Protocol("completion")
			jobnet.Handle(p, "begin", handler)
			p.Handle("begin", nil)
		}},
		{"empty protocol", `invalid protocol name ""`, func(m *jobnet.Mux) { m.Protocol("") }},
		{"dotted protocol", `invalid protocol name "a.b"`, func(m *jobnet.Mux) { m.Protocol("a.b") }},
		{"capitals", `invalid protocol name "Completion"`, func(m *jobnet.Mux) { m.Protocol("Completion") }},
		{"jobnet's own", `invalid protocol name "jobnet"`, func(m *jobnet.Mux) { m.Protocol("jobnet") }},
		{"hop-like kind", `invalid request kind "fanout:x"`, func(m *jobnet.Mux) {
			jobnet.Handle(m.Protocol("completion"), "fanout:x", handler)
		}},
		{"empty kind", `invalid request kind ""`, func(m *jobnet.Mux) { m.Protocol("completion").Handle("", nil) }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tc.want) {
					t.Errorf("panic %v, want one saying %s", r, tc.want)
				}
			}()
			tc.do(jobnet.NewMux(0))
		})
	}
	// Two nodes' Muxes, or two protocols of one, may use the same names.
	a, b := jobnet.NewMux(0), jobnet.NewMux(1)
	for _, m := range []*jobnet.Mux{a, b} {
		jobnet.Handle(m.Protocol("completion"), "begin", handler)
		jobnet.Handle(m.Protocol("redundancy"), "begin", handler)
	}
}
