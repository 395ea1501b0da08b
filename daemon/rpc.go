package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/scrfs/scrfs/peer"
)

// The daemons of a job coordinate with small JSON requests over peer links.
// A request to this node's own index is dispatched locally, so a job of one
// node runs exactly the same protocol without a network.

// handler serves one kind of request; req is the JSON body.
type handler func(ctx context.Context, from int, req json.RawMessage) (any, error)

// rpc holds the request handlers and the peer node once it runs.
type rpc struct {
	self     int
	size     int
	handlers map[string]handler
	node     *peer.Node // nil for a job of one node
}

func newRPC(self, size int) *rpc {
	return &rpc{self: self, size: size, handlers: map[string]handler{}}
}

// handle registers h for kind. All handlers are registered before the peer
// node starts, so a request never arrives for a kind not yet known.
func (r *rpc) handle(kind string, h handler) { r.handlers[kind] = h }

// peerHandlers adapts the handlers to peer's byte-level interface.
func (r *rpc) peerHandlers() map[string]peer.Handler {
	out := make(map[string]peer.Handler, len(r.handlers))
	for kind, h := range r.handlers {
		out[kind] = func(ctx context.Context, from int, req []byte) ([]byte, error) {
			resp, err := h(ctx, from, req)
			if err != nil {
				return nil, err
			}
			return json.Marshal(resp)
		}
	}
	return out
}

// call sends req to node to and decodes the answer into resp (unless nil).
func (r *rpc) call(ctx context.Context, to int, kind string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var answer []byte
	if to == r.self {
		h := r.handlers[kind]
		if h == nil {
			return fmt.Errorf("no handler for %q", kind)
		}
		v, err := h(ctx, r.self, body)
		if err != nil {
			return err
		}
		if answer, err = json.Marshal(v); err != nil {
			return err
		}
	} else {
		if r.node == nil {
			return fmt.Errorf("call %s to node %d: no peer links in a job of one node", kind, to)
		}
		if answer, err = r.node.Call(ctx, to, kind, body); err != nil {
			return fmt.Errorf("%s to node %d: %w", kind, to, err)
		}
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(answer, resp); err != nil {
		return fmt.Errorf("%s from node %d: bad answer: %w", kind, to, err)
	}
	return nil
}

// callAll sends req to every node in nodes concurrently and returns the
// error of each that failed.
func (r *rpc) callAll(ctx context.Context, nodes []int, kind string, req any) map[int]error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := map[int]error{}
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.call(ctx, n, kind, req, nil); err != nil {
				mu.Lock()
				errs[n] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// all returns every node index of the job.
func (r *rpc) all() []int {
	out := make([]int, r.size)
	for i := range out {
		out[i] = i
	}
	return out
}

// decode unmarshals a request body into v.
func decode[T any](req json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(req, &v); err != nil {
		return v, fmt.Errorf("bad request: %w", err)
	}
	return v, nil
}
