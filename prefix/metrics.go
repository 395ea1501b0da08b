package prefix

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the prefix package's Prometheus metrics, scrfs_flush_* (see
// the package doc). Make one per daemon with NewMetrics and share it
// through Options.Metrics; a nil *Metrics records nothing. Label op is
// "flush" or "fetch".
type Metrics struct {
	bytes    *prometheus.CounterVec
	files    *prometheus.CounterVec
	failures *prometheus.CounterVec
	duration *prometheus.HistogramVec
	throttle prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg (nil: create them
// unregistered, which tests use). It fails if reg already holds them.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "flush", Name: "bytes_total",
			Help: "Bytes copied to (op=flush) or from (op=fetch) the prefix directory, holes of sparse files included.",
		}, []string{"op"}),
		files: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "flush", Name: "files_total",
			Help: "Regular files copied to or from the prefix directory.",
		}, []string{"op"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "flush", Name: "failures_total",
			Help: "Flush and fetch calls that failed, by reason: corrupt (CRC, size or missing file), canceled, io.",
		}, []string{"op", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "scrfs", Subsystem: "flush", Name: "duration_seconds",
			Help: "Duration of one node's part of a flush or fetch.",
			// 0.1 s (a small dataset on a quiet file system) to ~1.8 h (terabytes
			// through a throttle), doubling.
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 17),
		}, []string{"op"}),
		throttle: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "flush", Name: "throttle_wait_seconds_total",
			Help: "Time copy streams spent waiting for the bandwidth limiter, summed over streams.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.bytes, m.files, m.failures, m.duration, m.throttle} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register flush metrics: %w", err)
		}
	}
	return m, nil
}

// observe records the outcome of one Flush or Fetch call.
func (m *Metrics) observe(op string, files, bytes int64, took time.Duration, err error) {
	if m == nil {
		return
	}
	m.bytes.WithLabelValues(op).Add(float64(bytes))
	m.files.WithLabelValues(op).Add(float64(files))
	m.duration.WithLabelValues(op).Observe(took.Seconds())
	if err != nil {
		m.failures.WithLabelValues(op, failureReason(err)).Inc()
	}
}

func (m *Metrics) throttled(d time.Duration) {
	if m != nil && d > 0 {
		m.throttle.Add(d.Seconds())
	}
}

// failureReason maps an error to the low-cardinality reason label.
func failureReason(err error) string {
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		return "corrupt"
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "io"
}
