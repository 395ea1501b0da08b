package cache

import (
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the store's Prometheus series. Gauges are computed at scrape
// time from the store itself (a Collector), so they can never drift from
// what `scrfs status` shows.
type metrics struct {
	reg        prometheus.Registerer
	collector  *collector
	completion prometheus.Histogram
	written    prometheus.Counter
	evicted    prometheus.Counter
	failed     prometheus.Counter
	reused     prometheus.Counter
}

type collector struct {
	s                                    *Store
	datasets, used, cap, avail, readOnly *prometheus.Desc
}

func newMetrics(s *Store, reg prometheus.Registerer) *metrics {
	m := &metrics{
		reg: reg,
		completion: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "scrfs", Subsystem: "dataset", Name: "completion_duration_seconds",
			Help: "Time from a dataset's first entry to its completion (how long a checkpoint took to write).",
			// 100 ms to ~3.6 h: checkpoints take from seconds to hours.
			Buckets: prometheus.ExponentialBuckets(0.1, 2.5, 13),
		}),
		written: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "dataset", Name: "written_bytes_total",
			Help: "Bytes by which dataset files grew, counted when each file is closed (passthrough and daemon data paths alike).",
		}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "cache", Name: "evicted_datasets_total",
			Help: "Completed datasets evicted from the cache to respect datasets.cache_size.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "cache", Name: "failed_datasets_total",
			Help: "Datasets marked failed.",
		}),
		reused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "cache", Name: "reused_redundancy_files_total",
			Help: "Redundancy files of evicted datasets overwritten by a later encode instead of being deleted and allocated anew.",
		}),
		collector: &collector{
			s: s,
			datasets: prometheus.NewDesc("scrfs_datasets", "Datasets in the cache by state; failed counts recently failed datasets, which have left the cache, and failed ones whose files are kept.",
				[]string{"state"}, nil),
			used: prometheus.NewDesc("scrfs_cache_used_bytes",
				"Bytes of application files held in the cache by this job's datasets.", nil, nil),
			cap: prometheus.NewDesc("scrfs_cache_capacity_bytes",
				"Size of the file system holding the cache directory.", nil, nil),
			avail: prometheus.NewDesc("scrfs_cache_available_bytes",
				"Bytes still available to the daemon on the cache file system.", nil, nil),
			readOnly: prometheus.NewDesc("scrfs_cache_read_only",
				"1 while the cache state cannot be written to the control directory (the cache is then read-only: completed datasets are served, new ones refused), with the reason of the last failed write; 0 for every reason otherwise.",
				[]string{"reason"}, nil),
		},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.collector, m.completion, m.written, m.evicted, m.failed, m.reused} {
			reg.MustRegister(c)
		}
	}
	return m
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range []prometheus.Collector{m.collector, m.completion, m.written, m.evicted, m.failed, m.reused} {
		m.reg.Unregister(c)
	}
}

func (m *metrics) completed(info Info) {
	m.completion.Observe(info.Completed.Sub(info.Created).Seconds())
}

func (m *metrics) removed(info Info) {
	if info.State == Failed {
		m.failed.Inc()
	} else {
		m.evicted.Inc()
	}
}

func (s *Store) countWritten(n int64) {
	if n > 0 && s.metrics != nil {
		s.metrics.written.Add(float64(n))
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.datasets
	ch <- c.used
	ch <- c.cap
	ch <- c.avail
	ch <- c.readOnly
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counts := make(map[State]int)
	var used int64
	for _, d := range c.s.Datasets() {
		info := d.Info()
		counts[info.State.Shown()]++
		used += info.Bytes
	}
	counts[Failed] += len(c.s.Failures())
	for _, st := range States {
		ch <- prometheus.MustNewConstMetric(c.datasets, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(used))
	// Every reason always has a series, so alerts see the change.
	ro, active := c.s.ReadOnly()
	for _, reason := range ReadOnlyReasons {
		v := 0.0
		if active && ro.Reason == reason {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.readOnly, prometheus.GaugeValue, v, reason)
	}
	if u, err := c.s.Space(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.cap, prometheus.GaugeValue, float64(u.Capacity))
		ch <- prometheus.MustNewConstMetric(c.avail, prometheus.GaugeValue, float64(u.Available))
	}
}

// Space is what the cache file system holds.
type Space struct {
	Used      int64 // bytes of this job's dataset files
	Capacity  int64 // size of the file system
	Available int64 // free bytes available to the daemon
}

// Space reports the cache's usage and the capacity of its file system.
func (s *Store) Space() (Space, error) {
	var sp Space
	for _, d := range s.Datasets() {
		sp.Used += d.Info().Bytes
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.CacheDir(), &st); err != nil {
		return sp, err
	}
	sp.Capacity = int64(st.Blocks) * st.Bsize
	sp.Available = int64(st.Bavail) * st.Bsize
	return sp, nil
}
