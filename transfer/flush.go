package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/group"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/prefix"
)

// Flushing datasets to the prefix directory is a job-wide round that node 0
// coordinates, because node 0 alone writes the prefix's index:
//
//	node 0:     mark D scheduled (durable intent), prefix.BeginFlush
//	node 0 → i: "flush" D — node i flushes its files of D and writes its
//	            manifest part, then answers (a long call: the answer is the
//	            report, so a node that stops answering is noticed by its link)
//	node 0:     once every node answered: prefix.CompleteFlush
//	node 0 → i: "flush-done" D with the outcome; each node records it
//
// A round starts when the flush.every-th dataset settles on node 0 (for
// the newest that settled: datasets may settle out of order), or on
// `scrfs flush` from any node ("flush-request" to node 0). A node whose link
// is down longer than cluster.connect_timeout fails the round, naming it. A
// crash anywhere leaves the index calling D "flushing" (never complete with
// a part missing); after a restart node 0 redoes rounds it had scheduled or
// that the index shows unfinished, and other nodes ask node 0
// ("flush-resume") about datasets they still have scheduled.
//
// Fetching at start (fetch.go) is coordinated by node 0 the same way.

// Store is what transfers need of the node-local cache; *cache.Store
// implements it.
type Store interface {
	Get(name string) *cache.Dataset
	Datasets() []*cache.Dataset
	SetFlush(name string, st cache.FlushStatus) error
	StagingDir(name string) string
	Adopt(r cache.Route, st cache.State, staged string, seq uint64, completed time.Time) (*cache.Dataset, error)
	Drop(name, why string) error
	ReserveIDs(next uint64)
	NodeID() string
	// Fetched reports (node 0) that every node adopted its share of a
	// dataset from the prefix: it needs this job's record, and redundancy
	// again.
	Fetched(name string)
	// Progressing reports that the fetch the mount waits for at a start
	// is copying bytes.
	Progressing()
	// Arriving marks (node 0) a dataset the restore fetches, until it
	// settles or done is called: the stock-taking passes it by.
	Arriving(name string) (done func())
	// ArrivalChanged reports that the mount shows a dataset being fetched
	// at route r (Flusher.Arrival), or no longer does; Decided that the
	// job decided what it restores; ShowPointers shows the pointer files
	// of the checkpoint restored.
	ArrivalChanged(r cache.Route)
	Decided()
	ShowPointers(ps []cache.Pointer)
}

// Options configure a Flusher.
type Options struct {
	Mux   *jobnet.Mux
	Store Store
	// Nodes is the number of nodes in the job; this node is Mux.Self().
	Nodes int
	// Prefix is where datasets are flushed to and fetched from (a
	// directory or object storage: the Flusher does not know which); nil
	// disables flush and fetch. The Flusher does not close it.
	Prefix *prefix.Prefix
	// Every flushes every Every-th settled dataset (0: only on request).
	Every int
	// Fetch enables fetching the newest checkpoint at start.
	Fetch bool
	// Assembler puts a file several nodes wrote together, for a flush
	// that writes it to the prefix as one file (*namespace.Namespace).
	Assembler Assembler
	// Streams, CRC: prefix.Options'. Bandwidth limits background flushes
	// (bytes/s, 0 = unlimited) when Async.
	Streams   int
	CRC       bool
	Async     bool
	Bandwidth int64
	// ControlDir keeps flush.json, what outlives datasets: the store's
	// verified control directory.
	ControlDir *jobdir.Dir
	// Started is when this daemon started: a dataset created on node 0
	// before it and unknown here may have lost its files with an earlier
	// daemon.
	Started time.Time
	// SettleWait bounds how long a node's part waits for its dataset to
	// settle (complete, then protected or degraded).
	SettleWait time.Duration
	// ConnectTimeout bounds waiting for a node's link; MemberTimeout how
	// long node 0 waits for the others to join a fetch beyond that.
	ConnectTimeout time.Duration
	MemberTimeout  time.Duration
	// RoundCheck is how long a node whose part is durable waits for the
	// round's outcome before asking node 0 about it (0: DefaultRoundCheck).
	RoundCheck time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Assembler puts file p of dataset, a file several members wrote,
// together in dst from every writer's part.
type Assembler interface {
	Assemble(ctx context.Context, dataset, p string, dst *os.File) error
}

// Flusher is a node's flush and fetch machinery. Create it with New before
// the transport delivers calls; Close it before the store.
type Flusher struct {
	o        Options
	self     int
	net      *jobnet.Protocol // this protocol's requests and streams on o.Mux
	log      *slog.Logger
	prefix   *prefix.Prefix // nil disables flush and fetch
	every    int
	opts     prefix.Options // Streams, Limiter, CRC, Logger, Metrics, Buffers; shared by every call
	met      *flushMetrics
	g        *group.Group
	ctx      context.Context // the group's: ends at Close
	indexMax uint64          // the index's largest id at start (node 0)

	// started is closed once the daemon's restore is over: this node's
	// flush jobs wait for it, so a flush never mistakes a dataset that a
	// rebuild or fetch is about to bring back for one it never had.
	started   chan struct{}
	startOnce sync.Once
	wake      chan struct{} // capacity 1: the job queue grew
	fetch     fetchState
	blockBufs sync.Pool // *[]byte of prefix.BlockSize, for blocks read ahead of a fetch

	// mu protects the fields below. Never call the store while holding mu:
	// the store's events (Removed) take it.
	mu       sync.Mutex
	state    flushState
	changed  chan struct{}                // closed and replaced when a dataset settles or leaves the cache, or a round ends
	jobs     map[string]*flushJob         // this node's parts, by dataset, until the round's outcome
	queue    []*flushJob                  // jobs waiting for the worker, oldest first
	rounds   map[string]*flushRound       // node 0: rounds being coordinated, by dataset
	outcomes map[string]outcome           // the job-wide state of each dataset's last round, as this node heard it
	current  map[string]string            // the newest round this node heard of, by dataset
	fetched  map[string]prefix.IndexEntry // datasets fetched at start, as the index listed them
}

// New creates the Flusher and registers its requests on o.Mux. On node 0
// it also continues the dataset ids of the prefix's index, whose order is
// by id across allocations.
func New(o Options) (*Flusher, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RoundCheck <= 0 {
		o.RoundCheck = DefaultRoundCheck
	}
	g := group.New(context.Background())
	f := &Flusher{
		o:        o,
		self:     o.Mux.Self(),
		net:      o.Mux.Protocol("transfer"),
		log:      o.Logger,
		prefix:   o.Prefix,
		every:    o.Every,
		met:      newFlushMetrics(o.Registerer),
		g:        g,
		ctx:      g.Context(),
		started:  make(chan struct{}),
		changed:  make(chan struct{}),
		jobs:     map[string]*flushJob{},
		wake:     make(chan struct{}, 1),
		rounds:   map[string]*flushRound{},
		outcomes: map[string]outcome{},
		current:  map[string]string{},
		fetched:  map[string]prefix.IndexEntry{},
	}
	f.fetch.decided = make(chan struct{})
	f.blockBufs.New = func() any { b := make([]byte, prefix.BlockSize); return &b }
	st, err := loadFlushState(o.ControlDir)
	if err != nil {
		f.log.Warn("flush state unreadable; starting the flush counter afresh", "err", err)
	}
	f.state = st
	fm, err := prefix.NewMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	var limit *prefix.Limiter
	if o.Async {
		// SCR_FLUSH_ASYNC_BW limits background flushes only; a
		// synchronous flush (flush.async = false) runs at full speed.
		limit = prefix.NewLimiter(o.Bandwidth)
	}
	f.opts = prefix.Options{Streams: o.Streams, Limiter: limit, CRC: o.CRC,
		Logger: o.Logger, Metrics: fm, Buffers: prefix.NewBuffers(0)}

	jobnet.Handle(f.net, "flush-request", f.handleRequest)
	jobnet.Handle(f.net, "flush-resume", f.handleResume)
	jobnet.Handle(f.net, "flush-prepare", f.handlePrepare)
	jobnet.Handle(f.net, "flush", f.handleFlush)
	jobnet.Handle(f.net, "flush-done", f.handleDone)
	jobnet.Handle(f.net, "flush-progress", f.handleProgress)
	f.registerFetch()

	if f.self == 0 && f.prefix != nil {
		f.continueIndex()
	}
	g.Go(func(context.Context) { f.worker() })
	return f, nil
}

// Close cancels flushes and fetches under way (the intent of a round stays
// recorded and is redone after a restart) and waits for every goroutine
// the Flusher started.
func (f *Flusher) Close() {
	f.g.Stop()
	f.fetch.mu.Lock()
	a := f.fetch.arrival
	f.fetch.arrival = nil
	f.fetch.mu.Unlock()
	if a != nil {
		a.release() // the mount is gone: its opens are over
	}
}

// all returns every node index of the job.
func (f *Flusher) all() []int {
	out := make([]int, f.o.Nodes)
	for i := range out {
		out[i] = i
	}
	return out
}

// IndexMax returns the largest dataset id (sequence number) the prefix's
// index held when node 0 started; 0 elsewhere or without an index.
func (f *Flusher) IndexMax() uint64 { return f.indexMax }

// continueIndex reserves dataset ids after the index's largest and shows
// the newest flushed dataset's age from the start.
func (f *Flusher) continueIndex() {
	ix, err := f.prefix.ReadIndex(f.ctx)
	if err != nil {
		f.log.Warn("prefix index unreadable: new datasets may be numbered before flushed ones", "err", err)
		return
	}
	f.indexMax = ix.MaxID()
	f.o.Store.ReserveIDs(ix.MaxID() + 1)
	for _, e := range ix.Datasets {
		if e.State == prefix.StateComplete {
			f.met.flushed(e.Flushed)
		}
	}
}

// Start runs once the daemon's restore is over: it releases this node's
// flush jobs and picks up flushes a restart interrupted.
func (f *Flusher) Start() {
	f.startOnce.Do(func() { close(f.started) })
	if f.prefix == nil {
		return
	}
	f.g.Go(func(context.Context) { f.resume() })
}

// Settled is called on every node when a dataset's redundancy is settled
// (protected, degraded, or complete under SINGLE). Waiting flush jobs look
// again; node 0 counts the dataset and flushes every flush.every-th.
func (f *Flusher) Settled(name string) {
	if f == nil {
		return
	}
	f.broadcast()
	if f.self != 0 || f.ctx.Err() != nil {
		return
	}
	ds := f.o.Store.Get(name)
	if ds == nil || !ds.State().Completed() {
		return
	}
	f.mu.Lock()
	_, fetched := f.fetched[name]
	counted := !fetched && f.state.count(name)
	n := f.state.Settled
	if counted {
		if err := f.state.save(f.o.ControlDir); err != nil {
			f.log.Warn("persist flush counter", "err", err)
		}
	}
	f.mu.Unlock()
	if !counted || f.every <= 0 || f.prefix == nil || n%uint64(f.every) != 0 {
		return
	}
	name = f.newestCounted(name)
	if _, _, err := f.startRound(name, false, fmt.Sprintf("flush.every = %d", f.every)); err != nil {
		f.log.Warn("could not start a flush", "dataset", name, "err", err)
	}
}

// newestCounted returns the newest dataset in this node's cache that
// flush.every counted, name if none is newer. Datasets are protected at
// once, so a newer one can settle before an older one: the count that
// reaches flush.every flushes the newest that settled, never an older
// one behind it.
func (f *Flusher) newestCounted(name string) string {
	dss := f.o.Store.Datasets()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(dss) - 1; i >= 0; i-- {
		if n := dss[i].Name(); n == name || slices.Contains(f.state.Counted, n) {
			return n
		}
	}
	return name
}

// Lost records a dataset that left this node's cache.
func (f *Flusher) Lost(info cache.Info) {
	if f == nil {
		return
	}
	why := "evicted or dropped from the cache"
	if info.State == cache.Failed {
		why = "failed: " + info.Reason
	}
	f.goneArrival(info.Name)
	f.mu.Lock()
	f.state.lose(info.Name, why)
	err := f.state.save(f.o.ControlDir)
	f.mu.Unlock()
	if err != nil {
		f.log.Warn("persist flush state", "err", err)
	}
	f.broadcast()
}

// broadcast wakes everyone waiting for a dataset to change.
func (f *Flusher) broadcast() {
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Completed tells the flusher that a dataset completed in this node's
// cache (a flush of the newest one may be waiting for it).
func (f *Flusher) Completed() { f.broadcast() }

// Changes returns a channel closed at the next change of any flush: a dataset
// completed, settled or left the cache, or a round ended.
func (f *Flusher) Changes() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// outcome is a round's job-wide state as this node heard it.
type outcome struct {
	round string
	cache.FlushStatus
}

// setOutcome records the job-wide flush state of a dataset as this node
// last heard it.
func (f *Flusher) setOutcome(name string, o outcome) {
	f.mu.Lock()
	f.outcomes[name] = o
	if len(f.outcomes) > maxLost {
		for k := range f.outcomes {
			if k != name {
				delete(f.outcomes, k)
				break
			}
		}
	}
	f.mu.Unlock()
}

// DefaultRoundCheck is Options.RoundCheck's default: long enough for node 0
// to gather every part of a large flush, short enough that a lost round is
// noticed while an operator still watches.
const DefaultRoundCheck = 30 * time.Second

// errNoPrefix is returned when a flush is asked for without a prefix.
var errNoPrefix = errors.New("paths.prefix is not set: there is nowhere to flush to")

// errClosing is returned for work asked of a Flusher that is closing.
var errClosing = errors.New("this node is shutting down")

// resume picks up flushes a restart interrupted. Node 0 redoes the rounds
// it had scheduled and those the index shows unfinished for datasets still
// in its cache; another node asks node 0 about each dataset it still has
// scheduled.
func (f *Flusher) resume() {
	var scheduled []string
	for _, ds := range f.o.Store.Datasets() {
		if info := ds.Info(); info.Flush.State == cache.FlushScheduled || info.Flush.State == cache.FlushRunning {
			scheduled = append(scheduled, info.Name)
		}
	}
	if f.self != 0 {
		for _, name := range scheduled {
			f.g.Go(func(context.Context) { f.askResume(name) })
		}
		return
	}
	if ix, err := f.prefix.ReadIndex(f.ctx); err != nil {
		f.log.Warn("prefix index unreadable: unfinished flushes are not resumed", "err", err)
	} else {
		for _, e := range ix.Datasets {
			if ds := f.o.Store.Get(e.Name); e.State == prefix.StateFlushing && ds != nil && ds.State().Completed() {
				scheduled = append(scheduled, e.Name)
			}
		}
	}
	for _, name := range scheduled {
		if _, _, err := f.startRound(name, true, "resumed after a restart"); err != nil {
			f.log.Warn("could not resume a flush", "dataset", name, "err", err)
		}
	}
}

// askResume asks node 0 what became of a flush this node had scheduled
// when it stopped, and records the answer if the round is over.
func (f *Flusher) askResume(name string) {
	ctx, cancel := context.WithTimeout(f.ctx, 2*f.o.ConnectTimeout)
	defer cancel()
	var r resumeReply
	if err := f.net.Call(ctx, 0, "flush-resume", resumeMsg{Dataset: name, From: f.self}, &r); err != nil {
		f.finish(doneMsg{Dataset: name, Error: "could not ask node 0 about the interrupted flush: " + err.Error()})
		return
	}
	if r.Over {
		f.finish(doneMsg{Dataset: name, OK: r.OK, Error: r.Error})
	}
}
