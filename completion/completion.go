package completion

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/group"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/record"
)

// Store is what completion needs of the node-local cache; *cache.Store
// implements it.
type Store interface {
	Get(name string) *cache.Dataset
	Datasets() []*cache.Dataset
	Failures() []cache.Info
	RequestComplete(name, reason string) error
	Started(r cache.Route) (*cache.Dataset, error)
	Renamed(from string, to cache.Route) error
	SetRecord(name string, seq uint64, completed time.Time) error
	Fail(name, reason string) error
	NoteFailed(r cache.Route, reason string) error
	Adopt(r cache.Route, st cache.State, staged string, seq uint64, completed time.Time) (*cache.Dataset, error)
	StagingDir(name string) string
	NodeID() string
}

// Options configure a Completer.
type Options struct {
	Mux   *jobnet.Mux
	Store Store
	// Nodes is the number of nodes in the job; this node is Mux.Self().
	Nodes int
	// Incarnation names this daemon's run (the store's datasets record it).
	Incarnation string
	// ControlDir keeps node 0's ledger.
	ControlDir *jobdir.Dir
	// Scheme and Sets are what new datasets are protected with: Sets[s] are
	// the node indices of set s, by rank.
	Scheme record.Scheme
	Sets   [][]int
	// Timeout bounds a completion round: every node's files closed and its
	// share reported.
	Timeout time.Duration
	// ConnectTimeout bounds asking node 0 (Begin, Join) and telling a node
	// a round's outcome.
	ConnectTimeout time.Duration
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
}

// Completer is this node's part of the completion protocol. Create it with
// New before the transport delivers calls; Close it before the store.
type Completer struct {
	o       Options
	self    int
	net     *jobnet.Protocol // this protocol's requests and streams on o.Mux
	log     *slog.Logger
	g       *group.Group
	metrics *metrics

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when a dataset completes or leaves here
	// fired are the completion rules that fired here and are not told to
	// node 0 yet, oldest first; telling is set while tellFired runs.
	firedMu    sync.Mutex
	fired      []completeMsg
	telling    bool
	ledger     *ledger           // node 0 only
	seqFloor   uint64            // node 0: the least number a round may still record with (raiseSeqLocked)
	rounds     map[string]bool   // node 0: rounds under way
	ended      map[string]string // node 0: outcome of recent rounds ("" = recorded)
	endedOrder []string          // node 0: ended's names, oldest first
	setOf      map[int][2]int    // node index → set and rank
	runs       map[int]string    // node 0: each node's daemon run, from its latest join
	ids        map[int]string    // node 0: each node's identity, from its latest join
	// inherited names the datasets node 0's ledger held begun when this
	// run started: an earlier run took part in them, and its copy (or
	// the one it was about to start) went with it.
	inherited map[string]bool

	// recalled is closed once node 0 heard every node's join after its
	// start (or gave up on the silent ones); rounds wait for it. Closed
	// from the start on other nodes.
	recalled     chan struct{}
	recalledOnce sync.Once
}

// coordinator is the node that proves completions.
const coordinator = 0

// New returns this node's Completer and registers its requests.
func New(o Options) (*Completer, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Completer{
		o: o, self: o.Mux.Self(), net: o.Mux.Protocol("completion"), log: o.Logger, g: group.New(context.Background()),
		metrics: newMetrics(o.Registerer),
		changed: make(chan struct{}), rounds: map[string]bool{}, ended: map[string]string{}, runs: map[int]string{}, ids: map[int]string{},
		setOf: map[int][2]int{}, recalled: make(chan struct{}),
	}
	for s, members := range o.Sets {
		for rank, n := range members {
			c.setOf[n] = [2]int{s, rank}
		}
	}
	if len(c.setOf) != o.Nodes {
		return nil, errors.New("completion: the sets do not cover every node of the job")
	}
	if c.self != coordinator {
		close(c.recalled)
	}
	if c.self == coordinator {
		l, err := loadLedger(o.ControlDir)
		if l == nil {
			return nil, err
		}
		if err != nil {
			c.log.Error("completion ledger unreadable", "err", err)
		}
		c.ledger = l
		c.inherited = map[string]bool{}
		for name := range l.Begun {
			c.inherited[name] = true
		}
	}
	jobnet.Handle(c.net, "begin", c.handleBegin)
	jobnet.Handle(c.net, "began", c.handleBegan)
	jobnet.Handle(c.net, "rename", c.handleRename)
	jobnet.Handle(c.net, "renamed", c.handleRenamed)
	jobnet.Handle(c.net, "join", c.handleJoin)
	jobnet.Handle(c.net, "recall", c.handleRecall)
	jobnet.Handle(c.net, "complete", c.handleComplete)
	jobnet.Handle(c.net, "share", c.handleShare)
	jobnet.Handle(c.net, "record", c.handleRecord)
	jobnet.Handle(c.net, "fail", c.handleFail)
	jobnet.Handle(c.net, "bytes", c.handleBytes)
	return c, nil
}

// Close stops rounds under way (datasets stay complete and unrecorded
// until node 0 proves them again) and waits for every goroutine the
// Completer started.
func (c *Completer) Close() { c.g.Stop() }

// Changed tells waiting share requests that a dataset completed or left
// this node's cache (the store's Completed and Removed events).
func (c *Completer) Changed() {
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *Completer) changes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// all returns every node index of the job.
func (c *Completer) all() []int {
	out := make([]int, c.o.Nodes)
	for i := range out {
		out[i] = i
	}
	return out
}
