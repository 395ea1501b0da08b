package redundancy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/schemes"
)

// streamLinks gives a scheme operation one stream per pair of set members.
// Stream ids carry the operation's prefix (dataset and attempt token) and
// the pair's ranks, so streams of two operations never meet and a node
// playing two ranks of a rebuild (its own, and one it hosts) keeps them
// apart; of each pair the lower rank opens, the other accepts.
type streamLinks struct {
	net     *jobnet.Protocol
	nodes   []int  // node index of each member rank
	rank    int    // the rank this end plays
	prefix  string // operation id, e.g. "enc/ckpt.10/3f9a…"
	timeout time.Duration

	mu      sync.Mutex
	streams map[int]jobnet.Stream // by rank
}

// Conn returns the stream to member rank, opening it on first use.
func (l *streamLinks) Conn(ctx context.Context, rank int) (schemes.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.streams[rank]; s != nil {
		return s, nil
	}
	if rank < 0 || rank >= len(l.nodes) {
		return nil, fmt.Errorf("no stream to member %d", rank)
	}
	other := l.nodes[rank]
	id := fmt.Sprintf("%s/%d-%d", l.prefix, min(l.rank, rank), max(l.rank, rank))
	// A member that died before opening its end must not hold the others
	// forever; once open, every message has its own I/O deadline.
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	var s jobnet.Stream
	var err error
	if l.rank < rank {
		s, err = l.net.OpenStream(ctx, other, id)
	} else {
		s, err = l.net.AcceptStream(ctx, other, id)
	}
	if err != nil {
		return nil, err
	}
	if l.streams == nil {
		l.streams = map[int]jobnet.Stream{}
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

// links returns the streams of one operation of the set of nodes (by
// rank), for the end that plays rank.
func (p *Protector) links(nodes []int, rank int, prefix string) *streamLinks {
	return &streamLinks{net: p.net, nodes: nodes, rank: rank, prefix: prefix, timeout: p.o.ConnectTimeout}
}
