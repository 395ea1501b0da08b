package redundancy

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/group"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
)

// Store is what the protocols need of the node-local cache; *cache.Store
// implements it.
type Store interface {
	Get(name string) *cache.Dataset
	Datasets() []*cache.Dataset
	Obtain(r cache.Route) (*cache.Dataset, bool, error)
	RequestComplete(name, reason string) error
	SetState(name string, to cache.State, reason string) error
	Fail(name, reason string) error
	// Keep, Kept and Revive: a dataset that cannot be rebuilt now is
	// failed with its files kept, verified at every stock-taking, and
	// served again once its members are back.
	Keep(name, reason string) error
	Kept() []*cache.Dataset
	Revive(name string, to cache.State, reason string) error
	Failures() []cache.Info
	NoteFailed(r cache.Route, reason string) error
	Drop(name, why string) error
	Adopt(r cache.Route, st cache.State, staged string, seq uint64, completed time.Time) (*cache.Dataset, error)
	StagingDir(name string) string
	TakeSpare() string
	NodeID() string
	CacheSize() int
	// Restoring makes the mount's lookups of r wait, at most wait, until
	// done is called: r is about to be rebuilt here.
	Restoring(r cache.Route, wait time.Duration) (done func())
	// IsArriving says whether node 0's restore fetches the dataset from
	// the prefix: the stock-taking passes it by until it settles.
	IsArriving(name string) bool
	// Settled and Revised report what the store's events say (see
	// cache.Event): the dataset's redundancy is settled here, its record
	// was revised.
	Settled(name string)
	Revised(name string)
}

// Options configure a Protector.
type Options struct {
	Mux   *jobnet.Mux
	Store Store
	// Nodes is the number of nodes in the job; this node is Mux.Self().
	Nodes int
	// Params are the scheme new datasets are protected with (each dataset
	// is then handled under its record's).
	Params schemes.Params
	// Timeout is how long a set's coordinator waits for every member to be
	// ready before the dataset is left degraded (redundancy.timeout).
	Timeout time.Duration
	// ConnectTimeout bounds how long a notification keeps trying an
	// unreachable node, and how long a stream waits for its far end.
	ConnectTimeout time.Duration
	// MemberTimeout bounds how long stock-taking waits for a member's
	// inventory (restart.member_timeout), and lookups for a rebuild.
	MemberTimeout time.Duration
	// Roster learns the identity of every node of the job after each
	// stock-taking; nil: nobody reads it.
	Roster *record.Roster
	Logger *slog.Logger
	// Registerer receives the scrfs_redundancy_* and scrfs_rebuild_*
	// series; nil means none.
	Registerer prometheus.Registerer
}

// Protector is this node's part of the redundancy protocols. Create it with
// New before the transport delivers calls; Close it before the store.
type Protector struct {
	o       Options
	self    int
	net     *jobnet.Protocol // this protocol's requests and streams on o.Mux
	log     *slog.Logger
	bufs    *schemes.Buffers
	metrics *metrics
	g       *group.Group

	mu       sync.Mutex
	rounds   map[roundKey]*round    // coordinator: tries being gathered
	verdicts map[string]*waiter     // member: datasets waiting for a verdict
	running  bool                   // a stock-taking loop runs
	next     chan struct{}          // closed when the next stock-taking has finished; nil if none asked for
	rebuilds map[string]*rebuildRun // rebuilds under way here, the newest attempt of each dataset
	// protecting is the protect of each dataset running here (see Protect).
	protecting map[string]*protecting
	retakes    map[string]int // stock-takings asked for after failed protects (see retake)
	// rebuildRetries counts the stock-takings node 0 ran again after
	// failed rebuilds of each dataset (see retryRebuild).
	rebuildRetries map[string]int
}

// New returns this node's Protector and registers its request handlers on
// o.Mux.
func New(o Options) (*Protector, error) {
	if err := o.Params.Validate(); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Roster == nil {
		o.Roster = &record.Roster{}
	}
	p := &Protector{
		o:        o,
		self:     o.Mux.Self(),
		net:      o.Mux.Protocol("redundancy"),
		log:      o.Logger,
		bufs:     schemes.NewBuffers(),
		g:        group.New(context.Background()),
		rounds:   map[roundKey]*round{},
		verdicts: map[string]*waiter{},
		rebuilds: map[string]*rebuildRun{},

		protecting: map[string]*protecting{},
		retakes:    map[string]int{},

		rebuildRetries: map[string]int{},
	}
	p.metrics = newMetrics(o.Registerer, p.Rebuilding)
	jobnet.Handle(p.net, "ready", p.handleReady)
	jobnet.Handle(p.net, "verdict", p.handleVerdict)
	jobnet.Handle(p.net, "inventory", p.handleInventory)
	jobnet.Handle(p.net, "member-started", p.handleMemberStarted)
	jobnet.Handle(p.net, "retake", p.handleRetake)
	jobnet.Handle(p.net, "rebuild", p.handleRebuild)
	jobnet.Handle(p.net, "outcome", p.handleOutcome)
	jobnet.Handle(p.net, "members", p.handleMembers)
	return p, nil
}

// Close cancels what is under way (an encode in flight leaves its dataset
// complete, to be protected after the restart) and waits for every
// goroutine the Protector started.
func (p *Protector) Close() { p.g.Stop() }

// DataPath says how encodes and rebuilds here move data: "zerocopy"
// (spliced between sockets and files where the scheme allows) or "copy"
// (through buffers: switched off, or refused by the kernel).
func (p *Protector) DataPath() string { return schemes.ActivePath(p.options()...) }

// Scheme returns the scheme new datasets are protected with.
func (p *Protector) Scheme() schemes.Kind { return p.o.Params.Kind }

// options are what every encode and rebuild on this node shares: the
// piece buffers, the cache's spare redundancy files to write over, and the
// logger.
func (p *Protector) options(more ...schemes.Option) []schemes.Option {
	return append([]schemes.Option{schemes.WithBuffers(p.bufs), schemes.WithSpare(p.o.Store.TakeSpare),
		schemes.WithLogger(p.log)}, more...)
}

// tell sends msg as kind to nodes in the background, each tried for at most
// ConnectTimeout, and logs the ones that could not be reached. Every
// message told is idempotent, so one whose link broke in flight is sent
// again.
func (p *Protector) tell(kind string, msg any, nodes []int, what string, dataset string) {
	p.g.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, p.o.ConnectTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.net.CallRetrying(ctx, n, kind, msg, nil); err != nil {
					p.log.Warn(what, "dataset", dataset, "to", n, "err", err)
				}
			}()
		}
		wg.Wait()
	})
}
