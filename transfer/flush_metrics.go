package transfer

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// flushMetrics are the daemon's flush and fetch series on top of the flush
// package's own (bytes, files, failures by reason, durations, throttling):
// what only the orchestration knows.
type flushMetrics struct {
	newest prometheus.Gauge
	rounds *prometheus.CounterVec
	rate   *prometheus.GaugeVec
	demand prometheus.Counter

	mu       sync.Mutex // protects newestTS
	newestTS float64
}

func newFlushMetrics(reg prometheus.Registerer) *flushMetrics {
	m := &flushMetrics{
		newest: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "scrfs", Subsystem: "flush", Name: "newest_timestamp_seconds",
			Help: "Unix time at which the newest dataset whose flush completed job-wide became complete in the prefix " +
				"(0 until one did); alert on time() minus this.",
		}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "flush", Name: "rounds_total",
			Help: "Job-wide flushes (op=flush) and fetch attempts (op=fetch) coordinated by this node (node 0), by result.",
		}, []string{"op", "result"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "scrfs", Subsystem: "flush", Name: "rate_bytes_per_second",
			Help: "This node's current copy rate to (op=flush) or from (op=fetch) the prefix; 0 when idle.",
		}, []string{"op"}),
		demand: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "fetch", Name: "demand_bytes_total",
			Help: "Bytes of a checkpoint being fetched at the start that reads asked for before the fetch brought them, " +
				"read from the prefix ahead of it.",
		}),
	}
	for _, op := range []string{"flush", "fetch"} {
		m.rate.WithLabelValues(op)
		for _, res := range []string{"ok", "failed"} {
			m.rounds.WithLabelValues(op, res)
		}
	}
	if reg != nil {
		reg.MustRegister(m.newest, m.rounds, m.rate, m.demand)
	}
	return m
}

func (m *flushMetrics) round(op string, ok bool) {
	res := "ok"
	if !ok {
		res = "failed"
	}
	m.rounds.WithLabelValues(op, res).Inc()
}

// flushed moves the newest-flush gauge forward (never back: an older
// dataset flushed late does not make the checkpoints younger).
func (m *flushMetrics) flushed(at time.Time) {
	if at.IsZero() {
		return
	}
	ts := float64(at.UnixNano()) / 1e9
	m.mu.Lock()
	defer m.mu.Unlock()
	if ts > m.newestTS {
		m.newestTS = ts
		m.newest.Set(ts)
	}
}
