package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/cluster"
	"github.com/scrfs/scrfs/config"
	"github.com/scrfs/scrfs/fs"
)

// Options say what to run.
type Options struct {
	Config     *config.Config // validated
	Mountpoint string
	Logger     *slog.Logger
	Version    string
}

// Daemon is one running scrfs node.
type Daemon struct {
	cfg        *config.Config
	log        *slog.Logger
	version    string
	mountpoint string
	started    time.Time
	cacheDir   string
	controlDir string
	node, size int // node index and number of nodes in the job

	cluster     *cluster.Cluster
	rpc         *rpc
	ctx         context.Context // cancelled when the daemon stops; for background work
	reg         *prometheus.Registry
	metrics     *redundancyMetrics
	protect     *protector
	rebuild     *rebuilder
	flusher     *flusher
	store       *cache.Store
	fsys        *fs.FS
	mount       *fs.Mount
	metricsAddr string // bound metrics address
	ready       atomic.Bool
}

// Run runs a daemon until ctx is cancelled, then shuts it down cleanly.
// It returns an error if the daemon could not start or stop properly.
func Run(ctx context.Context, o Options) error {
	d := &Daemon{
		cfg:        o.Config,
		log:        o.Logger,
		version:    o.Version,
		mountpoint: o.Mountpoint,
		started:    time.Now(),
		cacheDir:   cluster.CacheDir(o.Config),
		controlDir: cluster.ControlDir(o.Config),
		size:       1,
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	cl, err := cluster.ResolveCluster(d.cfg, os.Environ())
	if err != nil {
		return err
	}
	d.cluster, d.node, d.size = cl, cl.Self, cl.Size()
	d.log = d.log.With("node", d.node)
	d.reg = newRegistry(d.cfg.Job.ID, d.version, d.node)
	d.metrics = newRedundancyMetrics(d.reg)
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	d.ctx = ctx

	if err := d.openStore(); err != nil {
		return err
	}
	defer d.store.Close()

	d.rpc = newRPC(d.node, d.size)
	d.registerCompletion()
	if d.protect, err = d.newProtector(); err != nil {
		return err
	}
	d.rebuild = d.newRebuilder()
	if d.flusher, err = d.newFlusher(); err != nil {
		return err
	}
	if err := d.startPeers(ctx); err != nil {
		return err
	}
	defer d.stopPeers()

	stopControl, err := d.serveControl()
	if err != nil {
		return err
	}
	defer stopControl()

	stopMetrics, bound := serveMetrics(d.cfg.Metrics.Listen, d.cfg.Metrics.Pprof, d.reg, d.log)
	d.metricsAddr = bound
	defer stopMetrics()

	if err := d.mountFS(); err != nil {
		return err
	}
	d.restore(ctx)
	d.flusher.start()
	d.ready.Store(true)
	d.log.Info("scrfs ready", "mountpoint", d.mount.Dir(), "cache", d.cacheDir, "control", d.controlDir,
		"data_path", d.dataPath(), "job", d.cfg.Job.ID, "pid", os.Getpid())

	<-ctx.Done()
	d.log.Info("shutting down", "reason", context.Cause(ctx))
	d.ready.Store(false)
	if err := d.mount.Unmount(); err != nil {
		return fmt.Errorf("unmount: %w", err)
	}
	d.log.Info("unmounted", "mountpoint", d.mount.Dir())
	return nil
}

func (d *Daemon) openStore() error {
	router, err := cache.NewRouter(d.cfg.MatchRegexp())
	if err != nil {
		return err
	}
	store, err := cache.Open(cache.Options{
		CacheDir:    d.cacheDir,
		ControlDir:  d.controlDir,
		CacheSize:   d.cfg.Datasets.CacheSize,
		Router:      router,
		Rules:       rulesOf(d.cfg.CompleteRules()),
		Logger:      d.log,
		Registerer:  d.reg,
		OnComplete:  d.onComplete,
		OnRemove:    d.onRemove,
		OnRuleFired: d.onRuleFired,
	})
	if err != nil {
		return err
	}
	d.store = store
	return nil
}

func (d *Daemon) mountFS() error {
	d.fsys = fs.New(fs.Options{Store: d.store, Logger: d.log, Registerer: d.reg})
	f := d.cfg.Fuse
	m, err := d.fsys.Mount(d.mountpoint, fs.MountOptions{
		MaxWrite:        int(f.MaxWrite),
		EntryTimeout:    f.EntryTimeout.Duration,
		AttrTimeout:     f.AttrTimeout.Duration,
		NegativeTimeout: f.NegativeTimeout.Duration,
		AllowOther:      f.AllowOther,
		Debug:           f.Debug,
		Passthrough:     f.Passthrough,
		Method:          f.Mount,
	})
	if err != nil {
		return err
	}
	d.mount = m
	return nil
}

func (d *Daemon) dataPath() string {
	if d.mount != nil && d.mount.Passthrough() {
		return "passthrough"
	}
	return "daemon"
}

// rulesOf turns the configured completion rules into the store's form.
func rulesOf(rules []config.CompleteRule) cache.Rules {
	var r cache.Rules
	for _, rule := range rules {
		switch rule.Kind {
		case config.RuleNext:
			r.Next = true
		case config.RuleRename:
			r.Rename = true
		case config.RuleMarker:
			r.Markers = append(r.Markers, rule.Marker)
		case config.RuleIdle:
			if r.Idle == 0 || rule.Idle < r.Idle {
				r.Idle = rule.Idle
			}
		}
	}
	return r
}

// onComplete starts protecting a dataset that just completed here.
func (d *Daemon) onComplete(info cache.Info) {
	go d.protect.protect(info)
}

// onRemove drops an evicted or failed dataset from the kernel's caches.
func (d *Daemon) onRemove(info cache.Info) {
	if d.fsys != nil {
		d.fsys.Forget(cache.Route{Name: info.Name, Kind: info.Kind, Root: info.Root})
	}
	d.flusher.lost(info)
}
