package jobnet

import (
	"context"
	"errors"

	"github.com/scrfs/scrfs/peer"
)

// PeerHandlers returns the handler table to start a peer.Node with, so
// that every request kind reaches m.
func PeerHandlers(m *Mux, kinds []string) map[string]peer.Handler {
	out := make(map[string]peer.Handler, len(kinds))
	for _, kind := range kinds {
		out[kind] = func(ctx context.Context, from int, req []byte) ([]byte, error) {
			return m.Serve(ctx, from, kind, req)
		}
	}
	return out
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

// OverPeer is the Transport of the job's authenticated TCP links.
func OverPeer(n *peer.Node) Transport { return peerTransport{n} }

type peerTransport struct{ n *peer.Node }

func (t peerTransport) Call(ctx context.Context, to int, kind string, req []byte) ([]byte, error) {
	b, err := t.n.Call(ctx, to, kind, req)
	if errors.Is(err, peer.ErrConnLost) {
		return nil, errors.Join(err, ErrConnLost)
	}
	return b, err
}

func (t peerTransport) OpenStream(ctx context.Context, to int, id string) (Stream, error) {
	s, err := t.n.OpenStream(ctx, to, id)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (t peerTransport) AcceptStream(ctx context.Context, from int, id string) (Stream, error) {
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
