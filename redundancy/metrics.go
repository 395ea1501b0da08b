package redundancy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/schemes"
)

// metrics are the series of encoding and rebuilding.
type metrics struct {
	encodeSeconds *prometheus.HistogramVec
	encodeBytes   *prometheus.CounterVec
	degraded      prometheus.Counter

	rebuildSeconds  prometheus.Histogram
	rebuildBytes    prometheus.Counter
	rebuildFailures prometheus.Counter
	// rebuilding and remaining read the rebuilds under way at scrape time.
	rebuilding, remaining prometheus.GaugeFunc
}

// newMetrics makes the series; under way reports the rebuilds running on
// this node, for the gauges.
func newMetrics(reg prometheus.Registerer, underWay func() []Progress) *metrics {
	m := &metrics{
		encodeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "scrfs", Subsystem: "redundancy", Name: "encode_duration_seconds",
			Help: "Time this node spent encoding a dataset across its set, by scheme.",
			// 10 ms to ~45 min: from tiny datasets to terabytes per node.
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 14),
		}, []string{"scheme"}),
		encodeBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "redundancy", Name: "encoded_bytes_total",
			Help: "Bytes of this node's dataset files protected by encoding, by scheme and data path (zerocopy: spliced; copy: through buffers).",
		}, []string{"scheme", "path"}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "redundancy", Name: "degraded_datasets_total",
			Help: "Datasets left without (full) redundancy because a set member was missing or encoding failed.",
		}),
		rebuildSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "scrfs", Subsystem: "rebuild", Name: "duration_seconds",
			Help: "Time this node spent in a dataset rebuild (as survivor or as the node restored).",
			// Same range as encoding: rebuilds move comparable amounts.
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 14),
		}),
		rebuildBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "rebuild", Name: "bytes_total",
			Help: "Bytes of dataset files handled by rebuilds on this node.",
		}),
		rebuildFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "rebuild", Name: "failures_total",
			Help: "Rebuilds that failed on this node.",
		}),
		rebuilding: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "scrfs", Subsystem: "rebuild", Name: "datasets",
			Help: "Datasets being rebuilt on this node now (as a survivor or as the node restored).",
		}, func() float64 { return float64(len(underWay())) }),
		remaining: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "scrfs", Subsystem: "rebuild", Name: "remaining_bytes",
			Help: "Bytes the rebuilds under way on this node have still to handle.",
		}, func() float64 {
			var left int64
			for _, p := range underWay() {
				left += max(p.Total-p.Done, 0)
			}
			return float64(left)
		}),
	}
	if reg != nil {
		reg.MustRegister(m.encodeSeconds, m.encodeBytes, m.degraded, m.rebuildSeconds, m.rebuildBytes, m.rebuildFailures,
			m.rebuilding, m.remaining)
	}
	return m
}

func (m *metrics) rebuilt(r *schemes.Result) {
	m.rebuildSeconds.Observe(r.Duration.Seconds())
	m.rebuildBytes.Add(float64(r.DataBytes))
}

func (m *metrics) encoded(scheme string, r *schemes.Result) {
	m.encodeSeconds.WithLabelValues(scheme).Observe(r.Duration.Seconds())
	m.encodeBytes.WithLabelValues(scheme, r.Path).Add(float64(r.DataBytes))
}
