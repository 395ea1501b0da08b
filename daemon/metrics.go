package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newRegistry returns the daemon's own registry (never the global one, so
// several daemons can live in one test process) with Go and process series
// and scrfs_node_info.
func newRegistry(job, version string, node int) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "scrfs"}),
	)
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "scrfs", Name: "node_info",
		Help:        "Constant 1, labelled with the daemon's job, node index and version.",
		ConstLabels: prometheus.Labels{"job_id": job, "node": strconv.Itoa(node), "version": version},
	})
	info.Set(1)
	reg.MustRegister(info)
	return reg
}

// serveMetrics starts the Prometheus endpoint, with Go profiles under
// /debug/pprof/ only if withPprof (metrics.pprof, which validation allows
// only on a loopback address): profiles show the daemon's memory and
// goroutines to whoever reaches the port. A busy address is reported and
// the daemon runs on without metrics: checkpoints matter more than graphs.
func serveMetrics(addr string, withPprof bool, reg *prometheus.Registry, log *slog.Logger) (stop func(), bound string) {
	if addr == "" {
		return func() {}, ""
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("metrics endpoint unavailable; running without it", "listen", addr, "err", err)
		return func() {}, ""
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	log.Info("metrics endpoint listening", "addr", ln.Addr().String(), "pprof", withPprof)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		// Shutdown closed the listener first: Serve has returned or is
		// returning, whatever connections are still being served.
		<-served
	}, ln.Addr().String()
}
