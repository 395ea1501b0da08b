package schemes

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// refusedLink is a link whose sends fail, as a link to a member that told
// this one why it failed and then closed does: the reason comes on the
// receiving side only once a send has failed.
type refusedLink struct {
	sendFailed chan struct{}
	reason     []byte
}

func (l *refusedLink) Conn(ctx context.Context, rank int) (Conn, error) { return l, nil }

func (l *refusedLink) Send(ctx context.Context, msg []byte) error {
	close(l.sendFailed)
	return errors.New("link closed by the peer")
}

func (l *refusedLink) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	select {
	case <-l.sendFailed:
		return append(buf[:0], l.reason...), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestPeerReasonBeatsClosedLink: a send that fails because the peer
// failed and closed its link does not end the session before the peer's
// reason, already on its way, is read: the outcome is that reason (a
// corrupt file there), not the closed link.
func TestPeerReasonBeatsClosedLink(t *testing.T) {
	why := fmt.Errorf("redundancy file of rank 1: %w", ErrCorrupt)
	link := &refusedLink{sendFailed: make(chan struct{}), reason: encodeAbort(1, why)}
	s := newSession(context.Background(), link, 0, 2, 4096, buildOptions(&Params{}, nil))
	defer s.close(nil)
	if err := s.sendControl(1, msgHello, []byte("hello")); err != nil {
		t.Fatalf("queue a message: %v", err)
	}
	_, err := s.recv(1, msgData, 0, nil, -1)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("outcome %v, want the peer's reason (ErrCorrupt)", err)
	}
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Rank != 1 {
		t.Fatalf("outcome %v, want a PeerError naming rank 1", err)
	}
}
