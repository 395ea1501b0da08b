package peer

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults applied by Start to zero Config fields.
const (
	DefaultDialTimeout = 5 * time.Second
	DefaultIOTimeout   = 30 * time.Second
	DefaultHeartbeat   = 2 * time.Second
	DefaultMaxBackoff  = 5 * time.Second
	// DefaultMaxFrame is the default payload limit: 16 MiB, so a 16 MiB
	// chunk travels as one frame (the 16-byte header comes on top).
	DefaultMaxFrame = 16 << 20

	// MinSecretLen is the shortest accepted job secret.
	MinSecretLen = 16

	// maxNameLen bounds job ids, addresses and stream ids: they travel
	// in the Hello with a one-byte length.
	maxNameLen = 255
	// maxNodes bounds node indices, so a hostile Hello cannot name node 2^32-1.
	maxNodes = 1 << 20
	// minMaxFrame keeps MaxFrame large enough for any control message.
	minMaxFrame = 4 << 10
	// maxMaxFrame keeps lengths within the header's uint32 with margin.
	maxMaxFrame = 1 << 30
)

// Config describes one Node. Start copies it; the caller may reuse it.
type Config struct {
	// Job is the job id; both ends of every connection must match. At most
	// 255 bytes, not empty.
	Job string
	// Terms are what every node of the running job must agree on (the
	// daemon puts its scheme, parameters and number of nodes here): a peer
	// with other terms is refused at the handshake, and both ends log why.
	// At most 255 bytes.
	Terms string
	// Self is this node's index into Addrs.
	Self int
	// Addrs holds every node's host:port by index. It is copied; the Node
	// updates its copy as nodes move (see Node.Addrs). An empty entry means
	// "not known yet". If Addrs[Self] has port 0, it is replaced by the
	// bound address after listening.
	Addrs []string
	// Listen is the address to bind; "" means Addrs[Self]. Use it to bind a
	// wildcard address while advertising Addrs[Self].
	Listen string
	// Secret is the job's shared secret, at least MinSecretLen bytes. It is
	// copied.
	Secret []byte

	// DialTimeout bounds one TCP dial (default DefaultDialTimeout).
	DialTimeout time.Duration
	// IOTimeout bounds every read or write of one frame and the whole
	// handshake (default DefaultIOTimeout).
	IOTimeout time.Duration
	// Heartbeat is the ping interval on links (default DefaultHeartbeat). A
	// link that hears nothing for the longer of four heartbeats and
	// IOTimeout is declared down: a silent peer is dead, a slow one is not.
	Heartbeat time.Duration
	// MaxFrame is the largest frame payload in bytes, sent or received
	// (default DefaultMaxFrame). All nodes of a job should agree.
	MaxFrame int
	// MaxBackoff caps the delay between redials of a link (default
	// DefaultMaxBackoff).
	MaxBackoff time.Duration
	// StreamHold is how long a stream dialled before its AcceptStream is
	// held before being dropped (default: IOTimeout).
	StreamHold time.Duration

	// Handlers are registered before the listener opens, so requests that
	// arrive the moment peers can dial already find them (Handle, called
	// after Start, races with early requests). The map is copied.
	Handlers map[string]Handler

	// Logger receives refusals, drops, link changes and moves; nil discards.
	Logger *slog.Logger
	// Registerer receives the scrfs_peer_* metrics; nil means no metrics.
	Registerer prometheus.Registerer
}

// Validate reports the first problem with c, naming the field. Zero
// durations and MaxFrame are valid (they mean the defaults).
func (c *Config) Validate() error {
	switch {
	case c.Job == "":
		return fmt.Errorf("peer config: Job is empty")
	case len(c.Job) > maxNameLen:
		return fmt.Errorf("peer config: Job is longer than %d bytes", maxNameLen)
	case len(c.Terms) > maxNameLen:
		return fmt.Errorf("peer config: Terms is longer than %d bytes", maxNameLen)
	case len(c.Addrs) == 0:
		return fmt.Errorf("peer config: Addrs is empty")
	case len(c.Addrs) > maxNodes:
		return fmt.Errorf("peer config: %d Addrs, at most %d nodes", len(c.Addrs), maxNodes)
	case c.Self < 0 || c.Self >= len(c.Addrs):
		return fmt.Errorf("peer config: Self %d is not an index into Addrs (0..%d)", c.Self, len(c.Addrs)-1)
	case len(c.Secret) < MinSecretLen:
		return fmt.Errorf("peer config: Secret has %d bytes, need at least %d", len(c.Secret), MinSecretLen)
	case c.DialTimeout < 0 || c.IOTimeout < 0 || c.Heartbeat < 0 || c.MaxBackoff < 0 || c.StreamHold < 0:
		return fmt.Errorf("peer config: DialTimeout, IOTimeout, Heartbeat, MaxBackoff and StreamHold must not be negative")
	case c.MaxFrame != 0 && (c.MaxFrame < minMaxFrame || c.MaxFrame > maxMaxFrame):
		return fmt.Errorf("peer config: MaxFrame %d is outside %d..%d", c.MaxFrame, minMaxFrame, maxMaxFrame)
	}
	for i, a := range c.Addrs {
		if a == "" {
			if i == c.Self && c.Listen == "" {
				return fmt.Errorf("peer config: Addrs[%d] (Self) is empty and Listen is not set", i)
			}
			continue
		}
		if err := checkAddr(a); err != nil {
			return fmt.Errorf("peer config: Addrs[%d]: %w", i, err)
		}
	}
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("peer config: Listen %q: %w", c.Listen, err)
		}
	}
	return nil
}

// checkAddr accepts host:port strings short enough for a Hello.
func checkAddr(a string) error {
	if len(a) > maxNameLen {
		return fmt.Errorf("address %.20q... is longer than %d bytes", a, maxNameLen)
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return fmt.Errorf("address %q is not host:port: %w", a, err)
	}
	return nil
}

// withDefaults returns a validated copy of c with zero fields defaulted and
// slices copied, so the caller's Config is never aliased.
func (c *Config) withDefaults() (Config, error) {
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	d := *c
	d.Addrs = append([]string(nil), c.Addrs...)
	d.Secret = append([]byte(nil), c.Secret...)
	d.Handlers = maps.Clone(c.Handlers)
	if d.DialTimeout == 0 {
		d.DialTimeout = DefaultDialTimeout
	}
	if d.IOTimeout == 0 {
		d.IOTimeout = DefaultIOTimeout
	}
	if d.Heartbeat == 0 {
		d.Heartbeat = DefaultHeartbeat
	}
	if d.MaxFrame == 0 {
		d.MaxFrame = DefaultMaxFrame
	}
	if d.MaxBackoff == 0 {
		d.MaxBackoff = DefaultMaxBackoff
	}
	if d.StreamHold == 0 {
		d.StreamHold = d.IOTimeout
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return d, nil
}

// idleTimeout is how long a link may stay silent before it is declared dead:
// four missed heartbeats, but never less than IOTimeout, so that an
// overloaded peer (whose pongs queue behind large frames or a busy CPU) is
// not mistaken for a dead one and its in-flight calls lost.
func (c *Config) idleTimeout() time.Duration {
	return max(4*c.Heartbeat, c.IOTimeout)
}
