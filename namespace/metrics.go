package namespace

import "github.com/prometheus/client_golang/prometheus"

// metrics are the namespace's series.
type metrics struct {
	received prometheus.Counter
	opens    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, n *Namespace) *metrics {
	m := &metrics{
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "namespace", Name: "received_bytes_total",
			Help: "Bytes of other nodes' files this node fetched into its read cache (only the blocks read, and what readahead fetched).",
		}),
		opens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "namespace", Name: "remote_opens_total",
			Help: "Opens of files another node holds, by result: fetched (transferred now: whole at open, or block by block as read), cached (in the read cache already), shared (joined a file being fetched); failed counts fetches that failed (their readers got EIO).",
		}, []string{"result"}),
	}
	for _, r := range []string{"fetched", "cached", "shared", "failed"} {
		m.opens.WithLabelValues(r)
	}
	cacheBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "scrfs", Subsystem: "namespace", Name: "read_cache_bytes",
		Help: "Bytes of other nodes' files kept in this node's read cache (namespace.read_cache bounds it).",
	}, func() float64 { return float64(n.rc.bytes()) })
	shared := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "scrfs", Subsystem: "namespace", Name: "shared_files",
		Help: "Files of the datasets shown here that several nodes wrote (each one file, read from every writer's part).",
	}, func() float64 { return float64(n.SharedFiles()) })
	if reg != nil {
		reg.MustRegister(m.received, m.opens, cacheBytes, shared)
	}
	return m
}
