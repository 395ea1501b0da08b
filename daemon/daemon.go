package daemon

import (
	"context"
	"errors"
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
	"github.com/scrfs/scrfs/fs/mount"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/namespace"
	"github.com/scrfs/scrfs/node"
	"github.com/scrfs/scrfs/peer"
	"github.com/scrfs/scrfs/prefix"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/transfer"
)

// Options say what to run.
type Options struct {
	Config     *config.Config // validated
	Mountpoint string
	Logger     *slog.Logger
	Version    string
	// GuardArgs are the arguments that make this program the mount's
	// guard (see mount.Options.Guard); nil: no guard.
	GuardArgs []string
}

// Daemon is one running scrfs node.
type Daemon struct {
	cfg        *config.Config
	log        *slog.Logger
	version    string
	mountpoint string
	guardArgs  []string
	started    time.Time
	cacheDir   string
	controlDir string
	self, size int // node index and number of nodes in the job

	cluster     *cluster.Cluster
	reg         *prometheus.Registry
	store       *cache.Store
	node        *node.Node
	prefix      *prefix.Prefix // nil: no prefix
	fsys        *fs.FS
	mount       *mount.Mount
	mux         *jobnet.Mux
	peer        *peer.Node // nil in a job of one node
	metricsAddr string     // bound metrics address
	ready       atomic.Bool

	// incarnation names this run of the daemon: the datasets it creates
	// record it, and node 0 judges shares by it.
	incarnation string
}

// Run runs a daemon until ctx is cancelled, then shuts it down cleanly:
// control and metrics stop, the mount is unmounted (lazily if busy), the
// protocols end and are waited for, then the store closes. It returns an
// error if the daemon could not start or stop properly.
func Run(ctx context.Context, o Options) error {
	d := &Daemon{
		cfg:         o.Config,
		log:         o.Logger,
		version:     o.Version,
		mountpoint:  o.Mountpoint,
		guardArgs:   o.GuardArgs,
		started:     time.Now(),
		cacheDir:    cluster.CachePath(o.Config).String(),
		controlDir:  cluster.ControlPath(o.Config).String(),
		incarnation: jobnet.NewToken(),
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	cl, err := cluster.ResolveCluster(d.cfg, os.Environ())
	if err != nil {
		return err
	}
	d.cluster, d.self, d.size = cl, cl.Self, cl.Size()
	d.log = d.log.With("node", d.self)
	d.reg = newRegistry(d.cfg.Job.ID, d.version, d.self)

	if err := d.openStore(); err != nil {
		return err
	}
	defer d.store.Close()
	if err := d.openPrefix(ctx); err != nil {
		return err
	}
	if d.prefix != nil {
		defer d.prefix.Close()
	}
	d.mux = jobnet.NewMux(d.self, node.ErrorCodes...)
	if err := d.buildNode(); err != nil {
		return err
	}
	defer d.node.Close()
	f := d.cfg.Fuse
	d.fsys = fs.New(fs.Options{Store: d.store, Job: d.node, Namespace: mountedNamespace{d.node.Namespace},
		Arrivals: mountedArrivals{d.node.Flusher},
		Logger:   d.log, Registerer: d.reg,
		EntryTimeout: f.EntryTimeout.Duration, AttrTimeout: f.AttrTimeout.Duration, NegativeTimeout: f.NegativeTimeout.Duration})
	// What the last run left being written can never complete: it fails
	// before a peer (a completion round) or the application can reach it.
	d.store.FailWriting(node.Incomplete)
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
	d.node.Restore(ctx, d.cfg.Restart.FromCache)
	d.ready.Store(true)
	d.log.Info("scrfs ready", "mountpoint", d.mount.Dir(), "cache", d.cacheDir, "control", d.controlDir,
		"data_path", d.dataPath(), "job", d.cfg.Job.ID, "pid", os.Getpid())

	<-ctx.Done()
	d.log.Info("shutting down", "reason", context.Cause(ctx))
	d.ready.Store(false)
	// Applications waiting on the job through the mount are let go first:
	// unmounting waits for their calls.
	d.node.Interrupt()
	if err := d.mount.Unmount(); err != nil {
		return fmt.Errorf("unmount: %w", err)
	}
	d.log.Info("unmounted", "mountpoint", d.mount.Dir())
	return nil
}

// openStore opens the job's cache. When the daemon holding it was killed
// but is held in the kernel (see mount.RecoverKilled), its mounts are
// aborted so that it exits, and the cache opened after it.
func (d *Daemon) openStore() error {
	err := d.openStoreOnce()
	var le *cache.LockedError
	if !errors.As(err, &le) {
		return err
	}
	freed, rerr := mount.RecoverKilled(d.cacheDir, le.Pid, killedExitWait, d.log)
	if rerr != nil {
		return fmt.Errorf("%w (%w)", err, rerr)
	}
	if !freed {
		return err
	}
	return d.openStoreOnce()
}

// killedExitWait bounds the wait for a killed daemon to exit once its
// connections are aborted.
const killedExitWait = 30 * time.Second

func (d *Daemon) openStoreOnce() error {
	router, err := cache.NewRouter(d.cfg.MatchRegexp())
	if err != nil {
		return err
	}
	store, err := cache.Open(cache.Options{
		CacheDir:    cluster.CachePath(d.cfg),
		ControlDir:  cluster.ControlPath(d.cfg),
		CacheSize:   d.cfg.Datasets.CacheSize,
		Router:      router,
		Rules:       rulesOf(d.cfg.CompleteRules()),
		Logger:      d.log,
		Registerer:  d.reg,
		Incarnation: d.incarnation,
		DecideWait:  d.cfg.Restart.MemberTimeout.Duration,
	})
	if err != nil {
		return err
	}
	d.store = store
	return nil
}

// buildNode builds this node's protocols on the store and the mux, before
// any peer can call. The caller closes it.
func (d *Daemon) buildNode() error {
	c := d.cfg
	n, err := node.New(node.Options{
		Store: d.store, Mux: d.mux, Cluster: d.cluster, Incarnation: d.incarnation, Started: d.started,
		PieceSize:      int(c.Redundancy.PieceSize),
		Timeout:        c.Redundancy.Timeout.Duration,
		ConnectTimeout: c.Cluster.ConnectTimeout.Duration,
		MemberTimeout:  c.Restart.MemberTimeout.Duration,
		Prefix:         d.prefix, Every: c.Flush.Every, Fetch: c.Fetch.Enabled,
		Streams: c.Flush.Streams, CRC: c.Flush.CRC, Async: c.Flush.Async, Bandwidth: int64(c.Flush.Bandwidth),
		ReadCache: d.readCacheBytes(), FetchWhole: int64(c.Namespace.FetchWhole),
		Logger: d.log, Registerer: d.reg,
	})
	if err != nil {
		return err
	}
	d.node = n
	return nil
}

// readCacheBytes resolves namespace.read_cache against the cache file
// system's size.
func (d *Daemon) readCacheBytes() int64 {
	sp, err := d.store.Space()
	if err != nil {
		d.log.Warn("cache file system size unknown: the read cache takes 1 GiB", "err", err)
		return 1 << 30
	}
	return d.cfg.ReadCacheBytes(sp.Capacity)
}

func (d *Daemon) mountFS() error {
	f := d.cfg.Fuse
	m, err := mount.New(d.mountpoint, d.fsys, mount.Options{
		CacheDir:    d.store.CacheDir(),
		MaxWrite:    int(f.MaxWrite),
		AllowOther:  f.AllowOther,
		Debug:       f.Debug,
		Passthrough: f.Passthrough,
		Method:      f.Mount,
		Guard:       d.guardArgs,
		Logger:      d.log,
		// A link or another user's directory is refused unless the
		// configuration trusts it.
		TrustMountpoint: f.TrustMountpoint,
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
		case config.RulePointer:
			if rule.Marker == "" {
				r.Pointer = true
			} else {
				r.Pointers = append(r.Pointers, rule.Marker)
			}
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

// mountedArrivals is the checkpoint a restart fetches as the mount asks
// for it.
type mountedArrivals struct{ *transfer.Flusher }

// Arrival returns the dataset arriving (a nil *Arrival stays a nil
// interface).
func (m mountedArrivals) Arrival() fs.Arrival {
	if a := m.Flusher.Arrival(); a != nil {
		return mountedArrival{a}
	}
	return nil
}

// mountedArrival is one arriving dataset as the mount asks for it.
type mountedArrival struct{ *transfer.Arrival }

func (m mountedArrival) Route() cache.Route { return m.Arrival.Route }
func (m mountedArrival) View() *record.View { return m.Arrival.View }
func (m mountedArrival) Open(ctx context.Context, e *record.Entry) (fs.RemoteFile, error) {
	r, err := m.Arrival.Open(ctx, e)
	if r == nil {
		return nil, err
	}
	return r, nil
}

// mountedNamespace is the namespace as the mount asks for it.
type mountedNamespace struct{ *namespace.Namespace }

// Open returns the namespace's copy being fetched as an fs.RemoteFile (a
// nil *Remote stays a nil interface).
func (m mountedNamespace) Open(ctx context.Context, dataset string, e *record.Entry) (string, fs.RemoteFile, error) {
	local, r, err := m.Namespace.Open(ctx, dataset, e)
	if r == nil {
		return local, nil, err
	}
	return local, r, err
}
