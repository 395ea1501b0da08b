package peer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/scrfs/scrfs/internal/sleep"
)

// LinkStatus is the state of the persistent link to one peer, as `scrfs
// status` shows it.
type LinkStatus struct {
	Peer      int           // node index
	Addr      string        // address dialled (the current one for a down link)
	Up        bool          // authenticated and heartbeating
	Since     time.Time     // when Up last changed (link creation while never up)
	LastError string        // most recent failure, kept after recovery; "" if none
	RTT       time.Duration // last heartbeat round trip; 0 until measured
}

// link keeps the outbound connection to one peer alive: it dials, serves
// the connection until it fails, and redials with backoff, until the Node
// closes. Calls borrow the current clientConn.
type link struct {
	n     *Node
	peer  int
	label string        // peer index as a metric label
	kick  chan struct{} // capacity 1: redial now, skipping the backoff wait

	mu sync.Mutex // protects the fields below
	cc *clientConn
	// changed is closed and replaced on every state change, so waiters
	// can block on it without polling.
	changed chan struct{}
	st      LinkStatus
	lastErr error // the error behind st.LastError, for errors.Is
	everUp  bool
	tried   bool // a dial has succeeded or failed
}

// linkTo returns the link to peer, creating it (and starting its dial loop)
// on first use.
func (n *Node) linkTo(peer int) (*link, error) {
	if peer < 0 || peer >= len(n.cfg.Addrs) || peer == n.cfg.Self {
		return nil, fmt.Errorf("link to node %d: %w (self %d, %d nodes)", peer, ErrUnknownPeer, n.cfg.Self, len(n.cfg.Addrs))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	if l := n.links[peer]; l != nil {
		return l, nil
	}
	l := &link{
		n:       n,
		peer:    peer,
		label:   strconv.Itoa(peer),
		kick:    make(chan struct{}, 1),
		changed: make(chan struct{}),
		st:      LinkStatus{Peer: peer, Addr: n.addrs[peer], Since: time.Now()},
	}
	n.links[peer] = l
	n.met.linkUp.WithLabelValues(l.label).Set(0)
	// n.mu is held: attach by hand (goAttach would deadlock).
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		l.run()
	}()
	return l, nil
}

// Connect keeps links to the given peers up: each is dialled now (if not
// already), heartbeated, and redialled after failures until Close. Invalid
// indices (out of range, or Self) are logged and skipped.
func (n *Node) Connect(peers []int) {
	for _, p := range peers {
		if _, err := n.linkTo(p); err != nil && !errors.Is(err, ErrClosed) {
			n.log.Warn(fmt.Sprintf("connect: %v", err), "peer", p)
		}
	}
}

// WaitUp connects to peers (as Connect) and waits until every one of their
// links is up at the same moment, or ctx ends. The error names the peers
// still down and their last errors.
func (n *Node) WaitUp(ctx context.Context, peers []int) error {
	links := make([]*link, 0, len(peers))
	for _, p := range peers {
		l, err := n.linkTo(p)
		if err != nil {
			return fmt.Errorf("wait for links: %w", err)
		}
		links = append(links, l)
	}
	for {
		var down *link
		var wait chan struct{}
		for _, l := range links {
			l.mu.Lock()
			if l.cc == nil || l.cc.isDone() {
				down, wait = l, l.changed
			}
			l.mu.Unlock()
			if down != nil {
				break
			}
		}
		if down == nil {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("wait for links: node %d: %w", down.peer, down.downError(ctx.Err()))
		case <-n.ctx.Done():
			return ErrClosed
		}
	}
}

// Reach reports whether the link to peer is up. A peer this node has no
// link to yet is dialled, and Reach waits for that first dial (or ctx);
// a link that has been tried and is down is reported down at once, so a
// dead peer costs a caller one dial, not a wait for its return.
func (n *Node) Reach(ctx context.Context, peer int) bool {
	l, err := n.linkTo(peer)
	if err != nil {
		return false
	}
	for {
		l.mu.Lock()
		up, tried, ch := l.cc != nil && !l.cc.isDone(), l.tried, l.changed
		l.mu.Unlock()
		if up || tried {
			return up
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-n.ctx.Done():
			return false
		}
	}
}

// Links returns the status of every outbound link, ordered by peer.
func (n *Node) Links() []LinkStatus {
	n.mu.Lock()
	links := make([]*link, 0, len(n.links))
	for _, l := range n.links {
		links = append(links, l)
	}
	n.mu.Unlock()
	out := make([]LinkStatus, 0, len(links))
	for _, l := range links {
		out = append(out, l.status())
	}
	slices.SortFunc(out, func(a, b LinkStatus) int { return a.Peer - b.Peer })
	return out
}

// OnLinkChange adds f to the functions called whenever a link goes up or
// down. f runs on the link's own goroutine with no lock held; it must not
// block for long or call Close.
func (n *Node) OnLinkChange(f func(LinkStatus)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hooks = append(n.hooks, f)
}

func (l *link) status() LinkStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

// run is the link's dial-serve-redial loop.
func (l *link) run() {
	n := l.n
	b := redialBackoff(n.cfg.MaxBackoff)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	// pause waits out the backoff; false means the Node is closing.
	pause := func() bool {
		timer.Reset(b.Next())
		defer timer.Stop()
		select {
		case <-n.ctx.Done():
			return false
		case <-l.kick:
			b.Reset()
		case <-timer.C:
		}
		return true
	}
	for n.ctx.Err() == nil {
		addr, err := n.addr(l.peer)
		var fc *frameConn
		if err == nil {
			fc, err = n.dial(n.ctx, l.peer, addr, purposeLink, "")
		}
		if err != nil {
			if n.ctx.Err() != nil {
				break
			}
			l.failed(addr, err)
			if !pause() {
				break
			}
			continue
		}
		cc := newClientConn(l, fc, addr)
		l.up(cc)
		upAt := time.Now()
		err = cc.run()
		n.untrack(fc.c)
		if n.ctx.Err() != nil {
			err = ErrClosed
		}
		l.down(addr, err)
		// A link that dies right after coming up (a peer that accepts and
		// then misbehaves) must not be redialled in a tight loop: only a
		// link that stayed up for a while earns a fresh backoff.
		if time.Since(upAt) >= n.cfg.idleTimeout() {
			b.Reset()
		}
		if !pause() {
			break
		}
	}
	l.down("", ErrClosed)
}

// failed records a failed dial or handshake. Repeats of the same error are
// logged at debug level: a dead peer must not flood the log.
func (l *link) failed(addr string, err error) {
	l.mu.Lock()
	same := l.st.LastError == err.Error()
	l.st.LastError, l.lastErr = err.Error(), err
	if addr != "" {
		l.st.Addr = addr
	}
	if !l.tried {
		l.tried = true
		l.broadcastLocked() // Reach waits for the first dial
	}
	l.mu.Unlock()
	msg := err.Error()
	var re *RefusedError
	if !errors.As(err, &re) {
		msg = fmt.Sprintf("cannot reach node %d: %v", l.peer, err)
	}
	if same {
		l.n.log.Debug(msg, "peer", l.peer, "addr", addr)
	} else {
		l.n.log.Warn(msg, "peer", l.peer, "addr", addr)
	}
}

func (l *link) up(cc *clientConn) {
	l.mu.Lock()
	l.cc = cc
	l.st.Up, l.st.Since, l.st.Addr, l.st.RTT = true, time.Now(), cc.addr, 0
	again := l.everUp
	l.everUp, l.tried = true, true
	st := l.st
	l.broadcastLocked()
	l.mu.Unlock()
	l.n.met.linkUp.WithLabelValues(l.label).Set(1)
	if again {
		l.n.met.reconnects.WithLabelValues(l.label).Inc()
	}
	l.n.log.Info(fmt.Sprintf("link to node %d at %s up", l.peer, cc.addr), "peer", l.peer, "addr", cc.addr)
	l.notify(st)
}

// down marks the link down after its connection ended with err.
func (l *link) down(addr string, err error) {
	l.mu.Lock()
	wasUp := l.st.Up
	l.cc = nil
	if wasUp {
		l.st.Up, l.st.Since = false, time.Now()
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		l.st.LastError, l.lastErr = err.Error(), err
	}
	st := l.st
	l.broadcastLocked()
	l.mu.Unlock()
	if !wasUp {
		return
	}
	l.n.met.linkUp.WithLabelValues(l.label).Set(0)
	if errors.Is(err, ErrClosed) {
		l.n.log.Debug(fmt.Sprintf("link to node %d closed", l.peer), "peer", l.peer)
	} else {
		l.n.log.Warn(fmt.Sprintf("link to node %d at %s down: %v", l.peer, addr, err), "peer", l.peer, "addr", addr)
	}
	l.notify(st)
}

func (l *link) broadcastLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *link) notify(st LinkStatus) {
	l.n.mu.Lock()
	hooks := slices.Clone(l.n.hooks)
	l.n.mu.Unlock()
	for _, f := range hooks {
		f(st)
	}
}

// addrChanged points the link at a new address: a pending backoff is cut
// short, and a connection to the old address is dropped so the next dial
// goes to the new one.
func (l *link) addrChanged(addr string) {
	l.mu.Lock()
	cc := l.cc
	if cc == nil {
		l.st.Addr = addr
	}
	l.mu.Unlock()
	if cc != nil && cc.addr != addr {
		cc.close(fmt.Errorf("node %d moved to %s", l.peer, addr))
	}
	l.redialNow()
}

// redialNow makes a link that is down dial again at once instead of after
// its backoff: the peer just showed it is reachable.
func (l *link) redialNow() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// wait returns the link's live connection, waiting for it to come up until
// ctx ends or the Node closes.
func (l *link) wait(ctx context.Context) (*clientConn, error) {
	for {
		l.mu.Lock()
		cc, ch := l.cc, l.changed
		l.mu.Unlock()
		if cc != nil && !cc.isDone() {
			return cc, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, l.downError(ctx.Err())
		case <-l.n.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// downError explains why a waiter gave up on a down link: cause (its ctx
// error) and the link's last failure, both visible to errors.Is.
func (l *link) downError(cause error) error {
	l.mu.Lock()
	last := l.lastErr
	l.mu.Unlock()
	if last == nil {
		return fmt.Errorf("link to node %d not up yet: %w", l.peer, cause)
	}
	return fmt.Errorf("link down: %w: %w", last, cause)
}

// redialBackoff is the pause between dials of a peer (a link's, or a
// stream's), from 50 ms up to most, with jitter, so that the nodes of a
// job that lost the same peer do not redial it in lockstep.
func redialBackoff(most time.Duration) sleep.Backoff {
	return sleep.Backoff{Min: 50 * time.Millisecond, Max: most, Jitter: true}
}
