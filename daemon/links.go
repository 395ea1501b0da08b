package daemon

import (
	"context"
	"fmt"
	"sync"

	"github.com/scrfs/scrfs/peer"
	"github.com/scrfs/scrfs/schemes"
)

// streamLinks gives a scheme operation one authenticated TCP stream per
// pair of set members. Stream ids carry the operation's prefix (dataset and
// attempt token), so streams of two operations never meet; of each pair the
// node with the lower index dials, the other accepts.
type streamLinks struct {
	d      *Daemon
	nodes  []int  // node index of each member rank
	prefix string // operation id, e.g. "enc/ckpt.10/3f9a…"

	mu      sync.Mutex
	streams map[int]*peer.Stream // by rank
}

// Conn returns the stream to member rank, opening it on first use.
func (l *streamLinks) Conn(ctx context.Context, rank int) (schemes.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.streams[rank]; s != nil {
		return s, nil
	}
	node := l.d.rpc.node
	if node == nil || rank < 0 || rank >= len(l.nodes) {
		return nil, fmt.Errorf("no stream to member %d", rank)
	}
	other, self := l.nodes[rank], l.d.node
	id := fmt.Sprintf("%s/%d-%d", l.prefix, min(self, other), max(self, other))
	// A member that died before opening its end must not hold the others
	// forever; once open, every frame has its own I/O deadline.
	ctx, cancel := context.WithTimeout(ctx, l.d.cfg.Cluster.ConnectTimeout.Duration)
	defer cancel()
	var s *peer.Stream
	var err error
	if self < other {
		s, err = node.OpenStream(ctx, other, id)
	} else {
		s, err = node.AcceptStream(ctx, other, id)
	}
	if err != nil {
		return nil, err
	}
	if l.streams == nil {
		l.streams = map[int]*peer.Stream{}
	}
	l.streams[rank] = s
	return s, nil
}

func (l *streamLinks) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.streams {
		s.Close()
	}
}
