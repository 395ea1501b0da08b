package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/cluster"
	"github.com/scrfs/scrfs/config"
	"github.com/scrfs/scrfs/fs"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/namespace"
	"github.com/scrfs/scrfs/peer"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
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
	reg         *prometheus.Registry
	store       *cache.Store
	fsys        *fs.FS
	mount       *fs.Mount
	mux         *jobnet.Mux
	peer        *peer.Node // nil in a job of one node
	metricsAddr string     // bound metrics address
	ready       atomic.Bool

	// incarnation names this run of the daemon: the datasets it creates
	// record it, and node 0 judges shares by it.
	incarnation string
	// The protocols exist once the store is open; its callbacks may fire
	// before (an idle rule's timer), and then find them nil.
	proto atomic.Pointer[Protocols]
}

// ErrorCodes are the sentinel errors that keep their identity between
// nodes, so that (say) a flush of a dataset node 0 does not know reaches the
// CLI as "not found", and a node that does not hold a share yet is asked
// again. Every node of a job uses the same list.
var ErrorCodes = []jobnet.Code{
	{Name: "not_found", Err: cache.ErrNotFound},
	{Name: "read_only", Err: cache.ErrReadOnly},
	{Name: "exists", Err: cache.ErrExists},
	{Name: "not_empty", Err: cache.ErrNotEmpty},
	{Name: "too_many_lost", Err: schemes.ErrTooManyLost},
	{Name: "corrupt", Err: schemes.ErrCorrupt},
	{Name: "mismatch", Err: schemes.ErrMismatch},
	{Name: "not_held", Err: namespace.ErrNotHeld},
	// A node whose control directory is full refuses what it cannot
	// record; an application on another node sees ENOSPC too.
	{Name: "control_full", Err: cache.ErrControlFull},
	{Name: "no_space", Err: syscall.ENOSPC},
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
	d.cluster, d.node, d.size = cl, cl.Self, cl.Size()
	d.log = d.log.With("node", d.node)
	d.reg = newRegistry(d.cfg.Job.ID, d.version, d.node)

	if err := d.openStore(); err != nil {
		return err
	}
	defer d.store.Close()
	d.fsys = fs.New(fs.Options{Store: d.store, Logger: d.log, Registerer: d.reg})

	d.mux = jobnet.NewMux(d.node, ErrorCodes...)
	stopProtocols, err := d.startProtocols()
	if err != nil {
		return err
	}
	defer stopProtocols()
	// What the last run left being written can never complete: it fails
	// before a peer (a completion round) or the application can reach it.
	d.store.FailWriting(incomplete)
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
	d.proto.Load().Flusher.Start()
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

// openStore opens the job's cache. When the daemon holding it was killed
// but is held in the kernel (see fs.RecoverKilled), its mounts are
// aborted so that it exits, and the cache opened after it.
func (d *Daemon) openStore() error {
	err := d.openStoreOnce()
	var le *cache.LockedError
	if !errors.As(err, &le) {
		return err
	}
	freed, rerr := fs.RecoverKilled(d.cacheDir, le.Pid, killedExitWait, d.log)
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
		OnComplete:  d.onComplete,
		OnRemove:    d.onRemove,
		OnRuleFired: d.onRuleFired,
		OnStart:     d.onStart,
		OnRename:    d.onRename,
		Incarnation: d.incarnation,
	})
	if err != nil {
		return err
	}
	d.store = store
	return nil
}

// startProtocols creates this node's coordination protocols before any
// peer can call. stop closes them and waits for their goroutines.
func (d *Daemon) startProtocols() (stop func(), err error) {
	c := d.cfg
	pr, err := NewProtocols(ProtocolOptions{
		Mux: d.mux, Store: d.store, Mount: d.fsys, Cluster: d.cluster, Incarnation: d.incarnation, Started: d.started,
		PieceSize:      int(c.Redundancy.PieceSize),
		Timeout:        c.Redundancy.Timeout.Duration,
		ConnectTimeout: c.Cluster.ConnectTimeout.Duration,
		MemberTimeout:  c.Restart.MemberTimeout.Duration,
		Prefix:         c.Paths.Prefix, Every: c.Flush.Every, Fetch: c.Fetch.Enabled,
		Streams: c.Flush.Streams, CRC: c.Flush.CRC, Async: c.Flush.Async, Bandwidth: int64(c.Flush.Bandwidth),
		ReadCache: d.readCacheBytes(), FetchWhole: int64(c.Namespace.FetchWhole),
		Logger: d.log, Registerer: d.reg,
	})
	if err != nil {
		return nil, err
	}
	d.proto.Store(pr)
	d.fsys.UseNamespace(mountedNamespace{pr.Namespace})
	return pr.Close, nil
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
	m, err := d.fsys.Mount(d.mountpoint, fs.MountOptions{
		MaxWrite:        int(f.MaxWrite),
		EntryTimeout:    f.EntryTimeout.Duration,
		AttrTimeout:     f.AttrTimeout.Duration,
		NegativeTimeout: f.NegativeTimeout.Duration,
		AllowOther:      f.AllowOther,
		Debug:           f.Debug,
		Passthrough:     f.Passthrough,
		Method:          f.Mount,
		Guard:           true,
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

// onStart asks node 0 before the application starts a dataset here.
func (d *Daemon) onStart(r cache.Route) error {
	pr := d.proto.Load()
	if pr == nil {
		return errors.New("the daemon is still starting")
	}
	return pr.Complete.Begin(r)
}

// onRename renames a dataset being written on every node.
func (d *Daemon) onRename(from string, to cache.Route) error {
	pr := d.proto.Load()
	if pr == nil {
		return errors.New("the daemon is still starting")
	}
	return pr.Complete.Rename(from, to)
}

// onComplete wakes node 0's request for this node's share of a dataset
// whose files just closed.
func (d *Daemon) onComplete(info cache.Info) {
	if pr := d.proto.Load(); pr != nil {
		pr.Completed()
	}
}

// onRuleFired makes a completion rule that fired here a job-wide event.
func (d *Daemon) onRuleFired(r cache.Route, reason string) {
	if pr := d.proto.Load(); pr != nil {
		pr.Complete.RuleFired(r, reason)
	}
}

// onRemove drops an evicted or failed dataset from the kernel's caches and
// from the flush bookkeeping.
func (d *Daemon) onRemove(info cache.Info) {
	if d.fsys != nil {
		d.fsys.Forget(cache.Route{Name: info.Name, Kind: info.Kind, Root: info.Root})
	}
	if pr := d.proto.Load(); pr != nil {
		pr.Removed(info)
	}
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
