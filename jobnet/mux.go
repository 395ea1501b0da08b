package jobnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/scrfs/scrfs/internal/sleep"
)

// Handler serves one request kind: req is the request's JSON, the answer
// is encoded as JSON. A returned error reaches the caller as a RemoteError.
type Handler func(ctx context.Context, from int, req json.RawMessage) (any, error)

// Mux is one node's protocols on the job's network: their handlers by
// request kind, and calls to other nodes (or to this one, locally), each
// protocol in a namespace of its own (see Protocol). Register every
// handler before the Transport starts delivering calls.
type Mux struct {
	self  int
	codes []Code

	mu        sync.RWMutex
	protocols map[string]bool    // names given out by Protocol
	handlers  map[string]Handler // by wire kind
	width     int                // of fan-outs (Fanout)
	tr        Transport          // nil in a job of one node
	local     localStreams
}

// NewMux returns the Mux of node self. codes are the sentinel errors that
// keep their identity across nodes; every node of a job passes the same.
func NewMux(self int, codes ...Code) *Mux {
	return &Mux{self: self, codes: codes, protocols: map[string]bool{}, handlers: map[string]Handler{}, width: DefaultWidth}
}

// Self returns this node's index.
func (m *Mux) Self() int { return m.self }

// handle registers h for requests of the wire kind, and the hops that
// carry fan-outs of kind (see fanoutEach). A second handler for a kind is
// a programming error: it panics, naming the kind.
func (m *Mux) handle(kind string, h Handler) {
	hops := func(ctx context.Context, from int, raw json.RawMessage) (any, error) {
		var req hop
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("bad fan-out of %s: %w", kind, err)
		}
		if req.Kind != kind {
			return nil, fmt.Errorf("bad fan-out of %s: it carries %q", kind, req.Kind)
		}
		if err := req.Check(); err != nil {
			return nil, fmt.Errorf("bad fan-out of %s: %w", kind, err)
		}
		return m.handleHop(ctx, from, req)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handlers[kind] != nil {
		panic(fmt.Sprintf("jobnet: request kind %q registered twice on node %d", kind, m.self))
	}
	m.handlers[kind] = h
	m.handlers[hopPrefix+kind] = hops
}

// Attach gives the Mux its transport; until then (and in a job of one
// node, forever) calls to other nodes fail with ErrNoTransport.
func (m *Mux) Attach(t Transport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tr = t
}

func (m *Mux) transport() Transport {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.tr
}

// envelope is an answer on the wire: a result, or an error with its code.
// Unreached marks a fan-out's answer for a node that was never reached,
// Down one that a node on the way did not wait for (the origin calls it).
type envelope struct {
	Result    json.RawMessage `json:"r,omitempty"`
	Failed    bool            `json:"f,omitempty"`
	Unreached bool            `json:"u,omitempty"`
	Down      bool            `json:"d,omitempty"`
	Err       string          `json:"e,omitempty"`
	Code      string          `json:"c,omitempty"`
}

// seal makes the envelope of a handler's result or error.
func seal(codes []Code, res any, err error) envelope {
	var env envelope
	if err == nil {
		env.Result, err = json.Marshal(res)
	}
	if err != nil {
		env = envelope{Failed: true, Err: err.Error(), Code: codeOf(codes, err)}
	}
	return env
}

// Serve answers a call from node from: the byte-level entry point a
// Transport hands every request to. Its own error return is for the
// transport only (an answer too large to encode, say); handler errors
// travel inside the answer.
func (m *Mux) Serve(ctx context.Context, from int, kind string, req []byte) ([]byte, error) {
	res, err := m.dispatch(ctx, from, kind, req)
	return json.Marshal(seal(m.codes, res, err))
}

func (m *Mux) dispatch(ctx context.Context, from int, kind string, req []byte) (any, error) {
	m.mu.RLock()
	h := m.handlers[kind]
	m.mu.RUnlock()
	if h == nil {
		return nil, fmt.Errorf("node %d has no handler for %q", m.self, kind)
	}
	return h(ctx, from, req)
}

// call is Protocol.Call of a wire kind.
func (m *Mux) call(ctx context.Context, to int, kind string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s to node %d: %w", kind, to, err)
	}
	var result []byte
	if to == m.self {
		res, err := m.dispatch(ctx, m.self, kind, body)
		if err != nil {
			return &RemoteError{Node: m.self, Kind: kind, Msg: err.Error(), Code: codeOf(m.codes, err), err: err}
		}
		if result, err = json.Marshal(res); err != nil {
			return fmt.Errorf("%s to node %d: %w", kind, to, err)
		}
	} else {
		tr := m.transport()
		if tr == nil {
			return fmt.Errorf("%s to node %d: %w", kind, to, ErrNoTransport)
		}
		answer, err := tr.Call(ctx, to, kind, body)
		if err != nil {
			return fmt.Errorf("%s to node %d: %w", kind, to, err)
		}
		var env envelope
		if err := json.Unmarshal(answer, &env); err != nil {
			return fmt.Errorf("%s from node %d: bad answer: %w", kind, to, err)
		}
		if env.Failed {
			return &RemoteError{Node: to, Kind: kind, Msg: env.Err, Code: env.Code, err: errOfCode(m.codes, env.Code)}
		}
		result = env.Result
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(result, resp); err != nil {
		return fmt.Errorf("%s from node %d: bad answer: %w", kind, to, err)
	}
	return nil
}

// callRetrying is Protocol.CallRetrying of a wire kind.
func (m *Mux) callRetrying(ctx context.Context, to int, kind string, req, resp any) error {
	b := sleep.Backoff{Min: 20 * time.Millisecond, Max: 500 * time.Millisecond}
	for {
		err := m.call(ctx, to, kind, req, resp)
		if err == nil || !errors.Is(err, ErrConnLost) {
			return err
		}
		if b.Wait(ctx) != nil {
			return err
		}
	}
}

// callAll is Protocol.CallAll of a wire kind.
func (m *Mux) callAll(ctx context.Context, nodes []int, kind string, req any) map[int]error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := map[int]error{}
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.call(ctx, n, kind, req, nil); err != nil {
				mu.Lock()
				errs[n] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// openStream opens stream id (as on the wire) to node to (see Transport);
// a stream to this node itself is an in-process pipe.
func (m *Mux) openStream(ctx context.Context, to int, id string) (Stream, error) {
	if to == m.self {
		return m.local.open(id)
	}
	tr := m.transport()
	if tr == nil {
		return nil, fmt.Errorf("stream %s to node %d: %w", id, to, ErrNoTransport)
	}
	return tr.OpenStream(ctx, to, id)
}

// acceptStream waits for node from to open stream id (as on the wire).
func (m *Mux) acceptStream(ctx context.Context, from int, id string) (Stream, error) {
	if from == m.self {
		return m.local.accept(ctx, id)
	}
	tr := m.transport()
	if tr == nil {
		return nil, fmt.Errorf("stream %s from node %d: %w", id, from, ErrNoTransport)
	}
	return tr.AcceptStream(ctx, from, id)
}

// WaitUp waits until the links to every node of peers are up; this node's
// own index needs no link.
func (m *Mux) WaitUp(ctx context.Context, peers []int) error {
	var others []int
	for _, p := range peers {
		if p != m.self {
			others = append(others, p)
		}
	}
	if len(others) == 0 {
		return nil
	}
	tr := m.transport()
	if tr == nil {
		return fmt.Errorf("wait for nodes %v: %w", others, ErrNoTransport)
	}
	return tr.WaitUp(ctx, others)
}

// OnLinkChange registers f to hear of links going up and down; without a
// transport there are no links and f is never called.
func (m *Mux) OnLinkChange(f func(peer int, up bool)) {
	if tr := m.transport(); tr != nil {
		tr.OnLinkChange(f)
	}
}

// NewToken returns a fresh random token: it names one attempt of a
// protocol round (its streams, its answers), so messages of an earlier
// attempt are never taken for this one's.
func NewToken() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Kinds returns the request kinds registered on m.
func (m *Mux) Kinds() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.handlers))
	for k := range m.handlers {
		out = append(out, k)
	}
	return out
}
