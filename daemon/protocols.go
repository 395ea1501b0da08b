package daemon

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/cluster"
	"github.com/scrfs/scrfs/completion"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/namespace"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/redundancy"
	"github.com/scrfs/scrfs/schemes"
	"github.com/scrfs/scrfs/transfer"
)

// Protocols are one node's coordination protocols, wired to each other:
// a recorded dataset is protected, a protected one counts for flushes, a
// fetched one is recorded again.
type Protocols struct {
	Complete  *completion.Completer
	Protect   *redundancy.Protector
	Flusher   *transfer.Flusher
	Namespace *namespace.Namespace
	log       *slog.Logger
}

// Store is what the protocols need of the node-local cache; *cache.Store
// implements it.
type Store interface {
	completion.Store
	redundancy.Store
	transfer.Store
	namespace.Store
	ControlDir() *jobdir.Dir
	FailWriting(reason string)
	Settled(name string)
}

// Mount is what the protocols tell the file system; *fs.FS implements it.
type Mount interface {
	redundancy.Mount
	completion.Mount
}

// ProtocolOptions are what the protocols are made of.
type ProtocolOptions struct {
	Mux         *jobnet.Mux
	Store       Store
	Mount       Mount
	Cluster     *cluster.Cluster
	Incarnation string    // this run of the daemon
	Started     time.Time // when it started

	PieceSize                              int
	Timeout, ConnectTimeout, MemberTimeout time.Duration

	Prefix            string
	Every, Streams    int
	Fetch, CRC, Async bool
	Bandwidth         int64
	RoundCheck        time.Duration // 0: transfer's default
	ReadCache         int64         // bytes of other nodes' files kept here
	FetchWhole        int64         // other nodes' files up to this size are fetched whole at open

	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// NewProtocols creates a node's protocols, registering their requests on
// o.Mux: call it before the transport delivers calls.
func NewProtocols(o ProtocolOptions) (*Protocols, error) {
	cl := o.Cluster
	kind, err := schemes.ParseKind(cl.Scheme.Kind)
	if err != nil {
		return nil, err
	}
	set, _ := cl.Layout.Find(cl.Self)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	pr := &Protocols{}
	p, err := redundancy.New(redundancy.Options{
		Mux: o.Mux, Store: o.Store, Mount: o.Mount, Nodes: cl.Size(),
		Params: schemes.Params{Kind: kind, Size: len(set.Members), Replicas: cl.Scheme.Replicas,
			Parity: cl.Scheme.Parity, PieceSize: o.PieceSize},
		Timeout:        o.Timeout,
		ConnectTimeout: o.ConnectTimeout,
		MemberTimeout:  o.MemberTimeout,
		OnSettled:      func(name string) { o.Store.Settled(name); pr.Flusher.Settled(name) },
		OnMembers:      func(ids []string) { pr.Namespace.SetMembers(ids) },
		OnRevised:      func(name string) { pr.Namespace.Revised(name) },
		Logger:         o.Logger,
		Registerer:     o.Registerer,
	})
	if err != nil {
		return nil, err
	}
	sets := make([][]int, len(cl.Layout.Sets))
	for i, s := range cl.Layout.Sets {
		sets[i] = slices.Clone(s.Members)
	}
	comp, err := completion.New(completion.Options{
		Mux: o.Mux, Store: o.Store, Mount: o.Mount, Nodes: cl.Size(), Incarnation: o.Incarnation,
		ControlDir: o.Store.ControlDir(),
		Scheme: record.Scheme{Kind: kind.String(), Replicas: cl.Scheme.Replicas, Parity: cl.Scheme.Parity,
			PieceSize: o.PieceSize, Sets: len(sets)},
		Sets:           sets,
		Timeout:        o.Timeout,
		ConnectTimeout: o.ConnectTimeout,
		OnRecorded:     p.Protect,
		Logger:         o.Logger,
		Registerer:     o.Registerer,
	})
	if err != nil {
		p.Close()
		return nil, err
	}
	f, err := transfer.New(transfer.Options{
		Mux: o.Mux, Store: o.Store, Mount: o.Mount, Nodes: cl.Size(),
		Prefix: o.Prefix, Every: o.Every, Fetch: o.Fetch,
		Streams: o.Streams, CRC: o.CRC, Async: o.Async, Bandwidth: o.Bandwidth,
		ControlDir: o.Store.ControlDir(), Started: o.Started,
		SettleWait:     2*o.Timeout + o.ConnectTimeout,
		ConnectTimeout: o.ConnectTimeout,
		MemberTimeout:  o.MemberTimeout,
		RoundCheck:     o.RoundCheck,
		OnFetched:      comp.Fetched,
		Logger:         o.Logger,
		Registerer:     o.Registerer,
	})
	if err != nil {
		comp.Close()
		p.Close()
		return nil, err
	}
	ns, err := namespace.New(namespace.Options{Mux: o.Mux, Store: o.Store, ReadCache: o.ReadCache, FetchWhole: o.FetchWhole,
		MemberTimeout: o.MemberTimeout, Logger: o.Logger, Registerer: o.Registerer})
	if err != nil {
		f.Close()
		comp.Close()
		p.Close()
		return nil, err
	}
	// The prefix's index orders datasets across allocations: sequence
	// numbers go on after its largest.
	comp.ReserveSeq(f.IndexMax() + 1)
	pr.Complete, pr.Protect, pr.Flusher, pr.Namespace, pr.log = comp, p, f, ns, o.Logger
	return pr, nil
}

// Close stops the protocols and waits for their goroutines.
func (pr *Protocols) Close() {
	pr.Complete.Close()
	pr.Protect.Close()
	pr.Flusher.Close()
	pr.Namespace.Close()
}

// Completed tells the protocols a dataset completed in this node's cache
// (the store's OnComplete).
func (pr *Protocols) Completed() {
	pr.Complete.Changed()
	pr.Flusher.Completed()
}

// Removed tells the protocols a dataset left this node's cache (the
// store's OnRemove).
func (pr *Protocols) Removed(info cache.Info) {
	pr.Flusher.Lost(info)
	pr.Complete.Changed()
	pr.Namespace.Drop(info.Name)
}

// incomplete is why a dataset a killed daemon left being written fails.
const incomplete = "incomplete: it was being written when the daemon stopped"

// Restore brings the node's checkpoints back after its start, before it
// reports ready. Datasets that were still being written are failed: their
// writers are gone and they were never complete. This run then joins node
// 0, which proves the datasets complete here but never recorded. With
// fromCache (SCR_DISTRIBUTE) the set takes stock and rebuilds what a lost
// member held; without it the cache is cleared. When no completed dataset
// is left, the newest complete one is fetched from the prefix.
func (pr *Protocols) Restore(ctx context.Context, s Store, fromCache bool, nodes int) {
	s.FailWriting(incomplete)
	if err := pr.Complete.Join(ctx); err != nil {
		pr.log.Error("could not join node 0: datasets complete here stay unrecorded until it answers", "err", err)
	}
	switch {
	case !fromCache:
		for _, ds := range s.Datasets() {
			s.Drop(ds.Name(), "restart.from_cache = false")
		}
	case nodes > 1 && pr.Protect.Scheme() != schemes.Single:
		pr.Protect.Restart(ctx)
	default:
		// Datasets recorded but not yet protected when the daemon stopped.
		for _, ds := range s.Datasets() {
			if info := ds.Info(); info.State == cache.Complete && info.Seq > 0 {
				if rec, err := record.Load(ds.Dir()); err == nil {
					pr.Protect.Protect(rec)
				}
			}
		}
	}
	if !haveCheckpoint(s) {
		pr.Flusher.Fetch(ctx)
	}
}

// haveCheckpoint reports whether a completed dataset is in the cache.
func haveCheckpoint(s Store) bool {
	for _, ds := range s.Datasets() {
		if ds.State().Completed() {
			return true
		}
	}
	return false
}
