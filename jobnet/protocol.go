package jobnet

import (
	"context"
	"encoding/json"
	"fmt"
)

// Protocol is one protocol's namespace on a Mux: the request kinds it
// handles and calls, and the ids of the streams it opens, travel as
// "<protocol>.<kind>" and "<protocol>.<id>", so that two protocols can
// never take each other's messages, whatever they name them. A protocol
// makes every call, fan-out and stream through its Protocol; the Mux has
// no way to send a kind outside one.
type Protocol struct {
	m    *Mux
	name string
}

// reserved is the protocol name jobnet keeps for itself: the hops that
// carry fan-outs (hopPrefix) are named under it.
const reserved = "jobnet"

// Protocol returns the namespace of protocol name on m. name is made of
// lowercase letters, digits and '-'. It panics, naming it, when name is
// not such a name or m already has a protocol called name: two protocols
// sharing a namespace is a programming error, found when the node is
// built rather than when a message goes astray.
func (m *Mux) Protocol(name string) *Protocol {
	if !validName(name) || name == reserved {
		panic(fmt.Sprintf("jobnet: invalid protocol name %q (lowercase letters, digits and '-'; %q is jobnet's own)", name, reserved))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.protocols[name] {
		panic(fmt.Sprintf("jobnet: protocol %q registered twice on node %d", name, m.self))
	}
	m.protocols[name] = true
	return &Protocol{m: m, name: name}
}

// validName reports whether s is a protocol name or request kind: not
// empty, lowercase letters, digits and '-' only, so that the '.' between
// the two parts of a wire kind and hopPrefix's ':' never occur in either.
func validName(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return s != ""
}

// Kind returns request kind as it travels on the wire ("completion.begin"),
// which transports, their faults and their metrics see; the protocol's
// stream ids are named alike.
func (p *Protocol) Kind(kind string) string { return p.name + "." + kind }

// Handle registers h for the protocol's requests of kind, and the hops
// that carry its fan-outs (see Fanout). kind is made of lowercase letters,
// digits and '-'. It panics, naming it, when kind is not such a name or
// already has a handler.
func (p *Protocol) Handle(kind string, h Handler) {
	if !validName(kind) {
		panic(fmt.Sprintf("jobnet: protocol %s: invalid request kind %q (lowercase letters, digits and '-')", p.name, kind))
	}
	p.m.handle(p.Kind(kind), h)
}

// Checker is implemented by requests that can tell whether they are well
// formed (dataset names that are one path component, say): Handle calls
// Check before the handler sees the request, so nothing a peer sends
// reaches a path unchecked.
type Checker interface {
	Check() error
}

// Handle registers, on p, a handler whose request is decoded into a Req,
// and checked if it is a Checker, first. It panics as Protocol.Handle
// does.
func Handle[Req any](p *Protocol, kind string, h func(ctx context.Context, from int, req Req) (any, error)) {
	wire := p.Kind(kind)
	p.Handle(kind, func(ctx context.Context, from int, raw json.RawMessage) (any, error) {
		var req Req
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("bad %s request: %w", wire, err)
		}
		if c, ok := any(req).(Checker); ok {
			if err := c.Check(); err != nil {
				return nil, fmt.Errorf("bad %s request: %w", wire, err)
			}
		}
		return h(ctx, from, req)
	})
}

// Call sends req to node to as the protocol's request of kind and decodes
// the answer into resp (unless resp is nil). A call to this node runs the
// handler here. Handler errors come back as *RemoteError; anything else
// means the node was not reached (or the link broke: see ErrConnLost).
func (p *Protocol) Call(ctx context.Context, to int, kind string, req, resp any) error {
	return p.m.call(ctx, to, p.Kind(kind), req, resp)
}

// CallRetrying is Call that, while the link breaks with the request in
// flight (ErrConnLost), calls again with backoff until ctx ends. Only
// idempotent requests may use it.
func (p *Protocol) CallRetrying(ctx context.Context, to int, kind string, req, resp any) error {
	return p.m.callRetrying(ctx, to, p.Kind(kind), req, resp)
}

// CallAll sends req to every node of nodes at once and returns the error of
// each that failed.
func (p *Protocol) CallAll(ctx context.Context, nodes []int, kind string, req any) map[int]error {
	return p.m.callAll(ctx, nodes, p.Kind(kind), req)
}

// Fanout sends req as the protocol's request of kind to every node of
// nodes (this one too, if listed, answered here) and returns every node's
// reply, once each has answered or failed, or ctx ended.
//
// The request travels along a tree rooted at this node: it calls at most
// Width nodes, each of which passes it on to its part of the rest, and
// answers come back the same way, so the cost per node does not grow with
// the job. A node that cannot be reached on the way is never waited for
// inside the tree: the node above it serves its part of the tree, and this
// node calls it alone, waiting for its link as Call does. A hop that
// breaks mid-way is handled alike, so a node may receive the same request
// twice: only idempotent requests may fan out. Handlers see the origin,
// not the node that passed the request on, as from.
func (p *Protocol) Fanout(ctx context.Context, nodes []int, kind string, req any) map[int]Reply {
	out := make(map[int]Reply, len(nodes))
	p.FanoutEach(ctx, nodes, kind, req, func(n int, r Reply) { out[n] = r })
	return out
}

// FanoutEach is Fanout calling each with every node's reply as it arrives,
// one call at a time, before it returns.
func (p *Protocol) FanoutEach(ctx context.Context, nodes []int, kind string, req any, each func(n int, r Reply)) {
	p.m.fanoutEach(ctx, nodes, p.Kind(kind), req, each)
}

// OpenStream opens the protocol's stream id to node to (see Transport); a
// stream to this node itself is an in-process pipe.
func (p *Protocol) OpenStream(ctx context.Context, to int, id string) (Stream, error) {
	return p.m.openStream(ctx, to, p.Kind(id))
}

// AcceptStream waits for node from to open the protocol's stream id (see
// Transport).
func (p *Protocol) AcceptStream(ctx context.Context, from int, id string) (Stream, error) {
	return p.m.acceptStream(ctx, from, p.Kind(id))
}
