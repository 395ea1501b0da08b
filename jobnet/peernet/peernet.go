// Package peernet is the job's message layer (package jobnet) over peer's
// authenticated TCP links between the daemons, as package memnet is over
// memory for tests: the only place where the two meet, so that neither
// the protocols nor jobnet know what carries their messages.
package peernet

import (
	"context"
	"errors"

	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/peer"
)

// Handlers returns the handler table to start a peer.Node with, so that
// every request kind registered on m reaches it.
func Handlers(m *jobnet.Mux) map[string]peer.Handler {
	kinds := m.Kinds()
	out := make(map[string]peer.Handler, len(kinds))
	for _, kind := range kinds {
		out[kind] = func(ctx context.Context, from int, req []byte) ([]byte, error) {
			return m.Serve(ctx, from, kind, req)
		}
	}
	return out
}

// Transport is the jobnet.Transport of the job's authenticated TCP links.
func Transport(n *peer.Node) jobnet.Transport { return peerTransport{n} }

type peerTransport struct{ n *peer.Node }

func (t peerTransport) Call(ctx context.Context, to int, kind string, req []byte) ([]byte, error) {
	b, err := t.n.Call(ctx, to, kind, req)
	if errors.Is(err, peer.ErrConnLost) {
		return nil, errors.Join(err, jobnet.ErrConnLost)
	}
	return b, err
}

func (t peerTransport) OpenStream(ctx context.Context, to int, id string) (jobnet.Stream, error) {
	s, err := t.n.OpenStream(ctx, to, id)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (t peerTransport) AcceptStream(ctx context.Context, from int, id string) (jobnet.Stream, error) {
	s, err := t.n.AcceptStream(ctx, from, id)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (t peerTransport) WaitUp(ctx context.Context, peers []int) error { return t.n.WaitUp(ctx, peers) }

func (t peerTransport) Reach(ctx context.Context, peer int) bool { return t.n.Reach(ctx, peer) }

func (t peerTransport) OnLinkChange(f func(peer int, up bool)) {
	t.n.OnLinkChange(func(s peer.LinkStatus) { f(s.Peer, s.Up) })
}
