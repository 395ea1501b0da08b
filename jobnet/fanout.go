package jobnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultWidth is how many nodes one node passes a fan-out on to. With 8,
// a job of 10,000 nodes is reached in five hops, and no node sends more
// than 8 requests (or receives more than one) per fan-out, whatever the
// job's size.
const DefaultWidth = 8

// hopPrefix begins the request kind that carries a fan-out of kind k one
// hop down its tree: hopPrefix+k, so transports, their faults and metrics
// still tell the requests apart.
const hopPrefix = "jobnet.fanout:"

// RequestKind returns the request kind a transport-level kind carries:
// kind itself, or the kind of the fan-out a hop carries.
func RequestKind(kind string) string { return strings.TrimPrefix(kind, hopPrefix) }

// ErrUnreached is wrapped by a fan-out reply of a node that was not
// reached (its link stayed down, or broke, until the fan-out's context
// ended), as opposed to a *RemoteError: the node was reached and said no.
var ErrUnreached = errors.New("unreachable")

// Reply is one node's answer to a fan-out: the handler's result, or why
// there is none (a *RemoteError, or an error wrapping ErrUnreached).
type Reply struct {
	Result json.RawMessage
	Err    error
}

// Decode decodes the result into resp (unless resp is nil), or returns
// the reply's error.
func (r Reply) Decode(resp any) error {
	if r.Err != nil || resp == nil {
		return r.Err
	}
	return json.Unmarshal(r.Result, resp)
}

// hop is a fan-out on its way: the request as its origin sent it, and the
// nodes below the receiver, whom it passes the request on to.
type hop struct {
	Origin int             `json:"o"`
	Kind   string          `json:"k"`
	Req    json.RawMessage `json:"q"`
	Below  []int           `json:"b,omitempty"`
	// Budget is how long the sender still waits for the answer; zero
	// means as long as the receiver's own context lasts.
	Budget time.Duration `json:"t,omitempty"`
}

// Check refuses a hop that would loop or name no request.
func (h hop) Check() error {
	if h.Kind == "" || strings.HasPrefix(h.Kind, hopPrefix) {
		return fmt.Errorf("fan-out of request kind %q", h.Kind)
	}
	for _, n := range h.Below {
		if n < 0 {
			return fmt.Errorf("fan-out to node %d", n)
		}
	}
	return nil
}

// hopAnswer is every node's answer below (and including) a hop's receiver.
type hopAnswer struct {
	Answers map[int]envelope `json:"a"`
}

// SetWidth sets how many nodes this node passes a fan-out on to (at least
// 1); every node of a job may use its own.
func (m *Mux) SetWidth(w int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.width = max(1, w)
}

// fanoutEach is Protocol.FanoutEach of a wire kind.
func (m *Mux) fanoutEach(ctx context.Context, nodes []int, kind string, req any, each func(n int, r Reply)) {
	body, err := json.Marshal(req)
	if err != nil {
		for _, n := range nodes {
			each(n, Reply{Err: fmt.Errorf("%s to node %d: %w", kind, n, err)})
		}
		return
	}
	var mu sync.Mutex
	m.spread(ctx, m.self, kind, body, nodes, func(n int, env envelope) {
		mu.Lock()
		defer mu.Unlock()
		each(n, m.reply(kind, n, env))
	})
}

// reply turns the envelope a fan-out brought back from node n into a Reply.
func (m *Mux) reply(kind string, n int, env envelope) Reply {
	switch {
	case env.Unreached:
		return Reply{Err: fmt.Errorf("node %d %w: %s", n, ErrUnreached, env.Err)}
	case env.Failed:
		return Reply{Err: &RemoteError{Node: n, Kind: kind, Msg: env.Err, Code: env.Code, err: errOfCode(m.codes, env.Code)}}
	}
	return Reply{Result: env.Result}
}

// spread serves a fan-out at one node: the request runs here if this node
// is among nodes, and the others are split into at most Width parts, each
// passed to its first node to carry on. put receives every node's answer,
// possibly concurrently.
func (m *Mux) spread(ctx context.Context, origin int, kind string, body []byte, nodes []int, put func(int, envelope)) {
	var others []int
	var wg sync.WaitGroup
	for _, n := range nodes {
		switch {
		case n == m.self:
			wg.Go(func() {
				res, err := m.dispatch(ctx, origin, kind, body)
				put(n, seal(m.codes, res, err))
			})
		case !slices.Contains(others, n):
			others = append(others, n)
		}
	}
	for _, part := range m.split(others) {
		wg.Go(func() { m.pass(ctx, origin, kind, body, part, put) })
	}
	wg.Wait()
}

// split cuts nodes into at most Width contiguous parts of nearly equal
// size.
func (m *Mux) split(nodes []int) [][]int {
	m.mu.RLock()
	w := min(m.width, len(nodes))
	m.mu.RUnlock()
	parts := make([][]int, 0, w)
	for i := range w {
		parts = append(parts, nodes[i*len(nodes)/w:(i+1)*len(nodes)/w])
	}
	return parts
}

// pass hands part of a fan-out to its first node, which carries it to the
// rest. When that node's link is down, or the hop fails, the rest is
// served from here, and the first node is called alone by the origin.
func (m *Mux) pass(ctx context.Context, origin int, kind string, body []byte, part []int, put func(int, envelope)) {
	head, below := part[0], part[1:]
	tr := m.transport()
	if tr == nil {
		for _, n := range part {
			put(n, unreached(ErrNoTransport))
		}
		return
	}
	if tr.Reach(ctx, head) {
		var ans hopAnswer
		h := hop{Origin: origin, Kind: kind, Req: body, Below: below}
		if err := m.call(ctx, head, hopPrefix+kind, h.budgeted(ctx), &ans); err == nil {
			var wg sync.WaitGroup
			for _, n := range part {
				env, ok := ans.Answers[n]
				switch {
				case !ok:
					put(n, unreached(fmt.Errorf("no answer by way of node %d", head)))
				case env.Down && origin == m.self:
					wg.Go(func() { put(n, m.alone(ctx, kind, body, n)) })
				default:
					put(n, env)
				}
			}
			wg.Wait()
			return
		}
	}
	var wg sync.WaitGroup
	if len(below) > 0 {
		wg.Go(func() { m.spread(ctx, origin, kind, body, below, put) })
	}
	if origin == m.self {
		put(head, m.alone(ctx, kind, body, head))
	} else {
		put(head, envelope{Failed: true, Unreached: true, Down: true, Err: fmt.Sprintf("not reached by way of node %d", m.self)})
	}
	wg.Wait()
}

// alone calls node n with a fan-out of its own, as Call does: waiting for
// its link, and again after a link broke, until ctx ends.
func (m *Mux) alone(ctx context.Context, kind string, body []byte, n int) envelope {
	var ans hopAnswer
	h := hop{Origin: m.self, Kind: kind, Req: body}
	err := m.callRetrying(ctx, n, hopPrefix+kind, h.budgeted(ctx), &ans)
	switch env, ok := ans.Answers[n]; {
	case err != nil && IsRemote(err):
		return seal(m.codes, nil, err)
	case err != nil:
		return unreached(err)
	case !ok:
		return unreached(fmt.Errorf("node %d gave no answer of its own", n))
	default:
		return env
	}
}

// budgeted returns h with the time its sender still waits.
func (h hop) budgeted(ctx context.Context) hop {
	if dl, ok := ctx.Deadline(); ok {
		h.Budget = max(time.Until(dl), time.Millisecond)
	}
	return h
}

// handleHop serves a fan-out that reached this node: it runs here and goes
// on to the nodes below, and the answers of all go back together, before
// the sender stops waiting (a tenth of its budget is kept for the way
// back). Nodes below that cannot be reached are answered Down at once,
// for the origin to call alone.
func (m *Mux) handleHop(ctx context.Context, from int, h hop) (any, error) {
	if h.Budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.Budget-h.Budget/10)
		defer cancel()
	}
	var mu sync.Mutex
	answers := make(map[int]envelope, 1+len(h.Below))
	m.spread(ctx, h.Origin, h.Kind, h.Req, append([]int{m.self}, h.Below...), func(n int, env envelope) {
		mu.Lock()
		defer mu.Unlock()
		answers[n] = env
	})
	return hopAnswer{Answers: answers}, nil
}

// unreached is the envelope of a node that could not be reached, saying
// why in the transport's words (without the hop's own request kind).
func unreached(err error) envelope {
	if cause := errors.Unwrap(err); cause != nil {
		err = cause
	}
	return envelope{Failed: true, Unreached: true, Err: err.Error()}
}
