package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/scrfs/scrfs/internal/sleep"
)

// Handler serves one request kind. It runs on its own goroutine, concurrently
// with other handlers; req is owned by the handler. ctx is cancelled when the
// caller gives up, the link drops or the Node closes; Close waits for
// handlers, so they must return soon after ctx ends. A returned error reaches
// the caller as a *RemoteError carrying err.Error().
type Handler func(ctx context.Context, from int, req []byte) ([]byte, error)

// Node is one daemon's end of the job's peer network: a listener, the
// persistent links to peers, and the streams. Create it with Start; all
// methods are safe for concurrent use.
type Node struct {
	cfg Config // validated, defaulted; Addrs is superseded by addrs
	log *slog.Logger
	met *metrics
	ln  *net.TCPListener
	// localIP is the listener's IP when it is specific: outbound
	// connections leave from it, so peers see the address we advertise.
	localIP net.IP

	// ctx is cancelled by shutdown; every goroutine of the Node watches it.
	ctx     context.Context
	cancel  context.CancelFunc
	stopCtx func() bool // unregisters the Start ctx watcher
	wg      sync.WaitGroup
	hs      handshakeSlots // inbound handshakes in progress
	refused *refusalLog    // rate-limited log of refused inbound connections

	mu sync.Mutex // protects the fields below
	// closed is set by shutdown; goAttach and track refuse afterwards.
	closed   bool
	addrs    []string
	handlers map[string]Handler
	links    map[int]*link   // outbound links, created by Connect or Call
	inLinks  map[int]*inLink // inbound links, one per peer (newest wins)
	hooks    []func(LinkStatus)
	conns    map[*net.TCPConn]struct{} // every open conn, closed by shutdown
	waiters  map[streamKey]chan *Stream
	held     map[streamKey]*heldStream
}

// Start validates cfg, binds the listen address and starts serving. It returns
// once the listener is bound, so peers may dial immediately. The Node runs
// until Close, or until ctx is cancelled (which shuts it down like Close
// without waiting; call Close anyway to wait for its goroutines).
func Start(ctx context.Context, cfg Config) (*Node, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	met, err := newMetrics(c.Registerer)
	if err != nil {
		return nil, err
	}
	listen := c.Listen
	if listen == "" {
		listen = c.Addrs[c.Self]
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		met.unregister()
		return nil, fmt.Errorf("peer: node %d listen on %s: %w", c.Self, listen, err)
	}
	n := &Node{
		cfg:      c,
		log:      c.Logger,
		met:      met,
		ln:       l.(*net.TCPListener),
		refused:  newRefusalLog(c.Logger),
		addrs:    c.Addrs,
		handlers: make(map[string]Handler, len(c.Handlers)),
		links:    make(map[int]*link),
		inLinks:  make(map[int]*inLink),
		conns:    make(map[*net.TCPConn]struct{}),
		waiters:  make(map[streamKey]chan *Stream),
		held:     make(map[streamKey]*heldStream),
	}
	if ip := n.ln.Addr().(*net.TCPAddr).IP; !ip.IsUnspecified() {
		n.localIP = ip
	}
	for k, h := range c.Handlers {
		if h != nil {
			n.handlers[k] = h
		}
	}
	n.addrs[c.Self] = advertised(n.addrs[c.Self], n.ln.Addr())
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.wg.Add(2)
	go n.acceptLoop()
	go n.summarizeRefusals()
	n.stopCtx = context.AfterFunc(ctx, n.shutdown)
	n.log.Info(fmt.Sprintf("node %d of job %q listening on %s", c.Self, c.Job, n.ln.Addr()),
		"node", c.Self, "addr", n.ln.Addr().String(), "advertised", n.addrs[c.Self])
	return n, nil
}

// advertised is the address to announce: the configured one, with a port of
// 0 (or an empty address) filled in from the bound listener. An unspecified
// host (0.0.0.0, [::]) is not announced at all: peers would dial themselves.
func advertised(cfgAddr string, bound net.Addr) string {
	a := cfgAddr
	if a == "" {
		a = bound.String()
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return cfgAddr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return ""
	}
	if port == "0" {
		if _, bport, err := net.SplitHostPort(bound.String()); err == nil {
			return net.JoinHostPort(host, bport)
		}
	}
	return a
}

// Addr returns the address the Node listens on.
func (n *Node) Addr() net.Addr { return n.ln.Addr() }

// Self returns this node's index.
func (n *Node) Self() int { return n.cfg.Self }

// Addrs returns a copy of the current address table, by node index,
// including moves learnt from peers.
func (n *Node) Addrs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.addrs)
}

// SetAddr records that node i now listens on addr (for example from a new
// host list after a spare replaced a dead node). A link to i is redialled at
// the new address. Setting this node's own address changes what it
// advertises, not where it listens.
func (n *Node) SetAddr(i int, addr string) error {
	if i < 0 || i >= len(n.cfg.Addrs) {
		return fmt.Errorf("set address of node %d: %w (job has %d nodes)", i, ErrUnknownPeer, len(n.cfg.Addrs))
	}
	if err := checkAddr(addr); err != nil {
		return fmt.Errorf("set address of node %d: %w", i, err)
	}
	n.setAddr(i, addr)
	return nil
}

// setAddr updates node i's address and, if it changed, logs the move and
// points the link at the new address.
func (n *Node) setAddr(i int, addr string) {
	n.mu.Lock()
	old := n.addrs[i]
	if old == addr {
		n.mu.Unlock()
		return
	}
	n.addrs[i] = addr
	l := n.links[i]
	n.mu.Unlock()
	if old == "" {
		n.log.Info(fmt.Sprintf("node %d is at %s", i, addr), "peer", i, "addr", addr)
	} else {
		n.log.Info(fmt.Sprintf("node %d moved from %s to %s", i, old, addr), "peer", i, "old", old, "addr", addr)
	}
	if l != nil {
		l.addrChanged(addr)
	}
}

// addr returns node i's current address.
func (n *Node) addr(i int) (string, error) {
	if i < 0 || i >= len(n.cfg.Addrs) {
		return "", fmt.Errorf("node %d: %w (job has %d nodes)", i, ErrUnknownPeer, len(n.cfg.Addrs))
	}
	if i == n.cfg.Self {
		return "", fmt.Errorf("node %d is this node: %w", i, ErrUnknownPeer)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.addrs[i] == "" {
		return "", fmt.Errorf("node %d has no known address: %w", i, ErrUnknownPeer)
	}
	return n.addrs[i], nil
}

// Handle registers h for requests of the given kind, replacing any earlier
// handler; a nil h removes it. Kinds longer than 255 bytes can never be
// called. Handlers may be registered before or after peers connect; a
// request for an unregistered kind fails with ErrNoHandler at the caller.
func (n *Node) Handle(kind string, h Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if h == nil {
		delete(n.handlers, kind)
		return
	}
	n.handlers[kind] = h
}

func (n *Node) handler(kind string) Handler {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.handlers[kind]
}

// goAttach runs f on a goroutine tracked by Close, unless the Node is closed.
func (n *Node) goAttach(f func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

// track registers c so shutdown closes it. On a closed Node it closes c and
// reports false.
func (n *Node) track(c *net.TCPConn) bool {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		_ = c.Close()
		return false
	}
	n.conns[c] = struct{}{}
	n.mu.Unlock()
	return true
}

// untrack closes c and forgets it.
func (n *Node) untrack(c *net.TCPConn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
	_ = c.Close()
}

func (n *Node) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// Close shuts the Node down: it stops listening, closes every link, stream
// and held connection, cancels handlers and pending calls, and waits for all
// of its goroutines (running handlers included). Streams returned earlier
// fail with ErrClosed. Close is idempotent. It must not be called from a
// Handler or an OnLinkChange hook, which it would wait for.
func (n *Node) Close() error {
	n.stopCtx()
	n.shutdown()
	n.wg.Wait()
	n.met.unregister()
	return nil
}

// shutdown stops everything without waiting; idempotent.
func (n *Node) shutdown() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	conns := make([]*net.TCPConn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	n.conns = make(map[*net.TCPConn]struct{})
	for k, h := range n.held {
		h.timer.Stop()
		delete(n.held, k)
	}
	n.mu.Unlock()

	n.cancel()
	_ = n.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	n.log.Info(fmt.Sprintf("node %d closed", n.cfg.Self), "node", n.cfg.Self)
}

// acceptLoop accepts inbound connections and hands each to serveConn.
func (n *Node) acceptLoop() {
	defer n.wg.Done()
	// Out of file descriptors and the like: back off rather than spin, as
	// net/http does.
	b := sleep.Backoff{Min: 5 * time.Millisecond, Max: time.Second}
	for {
		c, err := n.ln.AcceptTCP()
		if err != nil {
			if n.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			delay := b.Next()
			n.log.Warn(fmt.Sprintf("node %d accept: %v; retrying in %v", n.cfg.Self, err, delay), "err", err)
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(delay):
			}
			continue
		}
		b.Reset()
		host := remoteHost(c)
		if ok, why := n.hs.acquire(host); !ok {
			n.met.dropped.WithLabelValues(dropBusy).Inc()
			n.refused.note("busy/"+host, dropBusy, host, fmt.Sprintf("dropped connection from %s: %s", c.RemoteAddr(), why),
				"remote", c.RemoteAddr().String(), "reason", dropBusy)
			_ = c.Close()
			continue
		}
		if !n.track(c) {
			n.hs.release(host)
			return
		}
		if !n.goAttach(func() { n.serveConn(c, host) }) {
			n.hs.release(host)
			n.untrack(c)
			return
		}
	}
}

// summarizeRefusals writes the refusal log's summary once per interval,
// and a last one when the Node shuts down.
func (n *Node) summarizeRefusals() {
	defer n.wg.Done()
	t := time.NewTicker(refusalEvery)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			n.refused.summarize()
			return
		case <-t.C:
			n.refused.summarize()
		}
	}
}
