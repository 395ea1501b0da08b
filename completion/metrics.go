package completion

import "github.com/prometheus/client_golang/prometheus"

// metrics are the completion protocol's series, on node 0.
type metrics struct {
	rounds  *prometheus.CounterVec
	seconds prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "completion", Name: "rounds_total",
			Help: "Datasets node 0 proved complete job-wide (result=recorded) or failed because a share could not be proven (result=failed).",
		}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "scrfs", Subsystem: "completion", Name: "duration_seconds",
			Help: "Time from a completion round's start to its record or failure, on node 0.",
			// 1 ms to ~2 min: a round waits for every node's files to close.
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 12),
		}),
	}
	for _, r := range []string{"recorded", "failed"} {
		m.rounds.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.rounds, m.seconds)
	}
	return m
}
