package peer

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics holds the scrfs_peer_* collectors. They always exist, so the code
// never checks for nil; they are registered only when a Registerer is given.
type metrics struct {
	reg prometheus.Registerer // nil: nothing registered

	linkUp     *prometheus.GaugeVec
	sent       *prometheus.CounterVec
	received   *prometheus.CounterVec
	reconnects *prometheus.CounterVec
	authFail   *prometheus.CounterVec
	dropped    *prometheus.CounterVec
	requests   *prometheus.CounterVec

	mu sync.Mutex // protects peers
	// peers caches each peer's counters, so hot paths (one Add per frame)
	// skip the label lookup.
	peers map[int]*peerCounters
}

// peerCounters are one peer's byte counters.
type peerCounters struct {
	sent, received prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "scrfs", "peer"
	m := &metrics{
		linkUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "link_up",
			Help: "1 while the persistent link to the peer is authenticated and healthy, 0 while it is down.",
		}, []string{"peer"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "sent_bytes_total",
			Help: "Bytes sent to the peer after authentication, frame headers included, links and streams.",
		}, []string{"peer"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "received_bytes_total",
			Help: "Bytes received from the peer after authentication, frame headers included, links and streams.",
		}, []string{"peer"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "reconnects_total",
			Help: "Times the link to the peer came back up after having been up before.",
		}, []string{"peer"}),
		authFail: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "auth_failures_total",
			Help: "Handshakes refused or failed, by reason: secret, job, version, node.",
		}, []string{"reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "dropped_total",
			Help: "Connections dropped for misbehaviour, by reason: garbage, oversize, timeout, busy, unclaimed.",
		}, []string{"reason"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "Requests (calls) sent to other nodes and received from them, by kind and direction (sent, received); heartbeats and bulk stream messages are not requests.",
		}, []string{"kind", "direction"}),
		peers: make(map[int]*peerCounters),
	}
	if reg == nil {
		return m, nil
	}
	var done []prometheus.Collector
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("register peer metrics: already registered (one Node per registry): %w", err)
			}
			return nil, fmt.Errorf("register peer metrics: %w", err)
		}
		done = append(done, c)
	}
	m.reg = reg
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.linkUp, m.sent, m.received, m.reconnects, m.authFail, m.dropped, m.requests}
}

// unregister removes the collectors, so a registry can host a new Node after
// this one is closed.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
}

// peer returns the cached byte counters of node i.
func (m *metrics) peer(i int) *peerCounters {
	m.mu.Lock()
	defer m.mu.Unlock()
	pc := m.peers[i]
	if pc == nil {
		l := strconv.Itoa(i)
		pc = &peerCounters{sent: m.sent.WithLabelValues(l), received: m.received.WithLabelValues(l)}
		m.peers[i] = pc
	}
	return pc
}

// request counts one request of kind sent to or received from a peer.
func (m *metrics) request(kind, direction string) {
	m.requests.WithLabelValues(kind, direction).Inc()
}

// Drop reasons for scrfs_peer_dropped_total.
const (
	dropGarbage   = "garbage"   // bad magic, unknown type, malformed payload, truncation
	dropOversize  = "oversize"  // length above the limit
	dropTimeout   = "timeout"   // deadline passed mid-handshake or mid-frame, or link idle
	dropBusy      = "busy"      // too many concurrent handshakes or held streams
	dropUnclaimed = "unclaimed" // stream held past StreamHold without AcceptStream
)
