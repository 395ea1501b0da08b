package node

import (
	"context"
	"github.com/scrfs/scrfs/prefix"
	"log/slog"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/cluster"
	"github.com/scrfs/scrfs/completion"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/names"
	"github.com/scrfs/scrfs/namespace"
	"github.com/scrfs/scrfs/pointers"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/redundancy"
	"github.com/scrfs/scrfs/schemes"
	"github.com/scrfs/scrfs/transfer"
)

// Store is what a node needs of its node-local cache; *cache.Store
// implements it.
type Store interface {
	completion.Store
	redundancy.Store
	transfer.Store
	namespace.Store
	names.Store
	pointers.Store
	ControlDir() *jobdir.Dir
	FailWriting(reason string)
	Decided()
	Drop(name, why string) error
	SetRecord(name string, seq uint64, completed time.Time) error
	// Listen attaches the node to the store's dataset events.
	Listen(l cache.Listener)
}

// Options are what a node is made of.
type Options struct {
	Store       Store
	Mux         *jobnet.Mux
	Cluster     *cluster.Cluster
	Incarnation string    // this run of the daemon
	Started     time.Time // when it started

	PieceSize                              int
	Timeout, ConnectTimeout, MemberTimeout time.Duration

	Prefix            *prefix.Prefix // nil: no flush or fetch; the caller closes it
	Every, Streams    int
	Fetch, CRC, Async bool
	Bandwidth         int64
	RoundCheck        time.Duration // 0: transfer's default
	ReadCache         int64         // bytes of other nodes' files kept here
	FetchWhole        int64         // other nodes' files up to this size are fetched whole at open

	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Node is one node of a job: its store and its coordination protocols,
// wired through the store's events. The protocols are exported for the
// daemon's control socket, which reports on them and passes requests on.
type Node struct {
	Complete  *completion.Completer
	Protect   *redundancy.Protector
	Flusher   *transfer.Flusher
	Namespace *namespace.Namespace
	// Names are the job-wide names of datasets being written.
	Names *names.Names
	// Pointers are the job's pointer files at the mount root.
	Pointers *pointers.Pointers

	store Store
	size  int // nodes in the job
	log   *slog.Logger

	// mountCalls ends the calls the mount makes on the application's
	// behalf (Begin, Rename) when the daemon stops: see Interrupt.
	mountCalls context.Context
	interrupt  context.CancelFunc

	// fetched is the dataset fetched at the start whose record the mount
	// waits for (decideOnRecord); "" when none.
	fetchedMu sync.Mutex
	fetched   string
}

// ErrorCodes are the sentinel errors that keep their identity between
// nodes, so that (say) a flush of a dataset node 0 does not know reaches the
// CLI as "not found", and a node that does not hold a share yet is asked
// again. Every node of a job uses the same list: pass it to jobnet.NewMux.
var ErrorCodes = append([]jobnet.Code{
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
	{Name: "pointer_too_large", Err: cache.ErrPointerTooLarge},
	{Name: "too_many_pointers", Err: cache.ErrTooManyPointers},
	// A fetch that failed for the prefix copy's fault is recorded in the
	// index; one that failed for a node's own reason is not.
	{Name: "bad_copy", Err: transfer.ErrBadCopy},
}, names.Codes...)

// New builds a node: it creates the protocols, registering their requests
// on o.Mux (call it before the transport delivers calls), and attaches the
// node to the store's events. Close it before the store.
func New(o Options) (*Node, error) {
	cl := o.Cluster
	kind, err := schemes.ParseKind(cl.Scheme.Kind)
	if err != nil {
		return nil, err
	}
	set, _ := cl.Layout.Find(cl.Self)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{store: o.Store, size: cl.Size(), log: o.Logger}
	roster := &record.Roster{}
	if n.Protect, err = redundancy.New(redundancy.Options{
		Mux: o.Mux, Store: o.Store, Nodes: cl.Size(),
		Params: schemes.Params{Kind: kind, Size: len(set.Members), Replicas: cl.Scheme.Replicas,
			Parity: cl.Scheme.Parity, PieceSize: o.PieceSize},
		Timeout:        o.Timeout,
		ConnectTimeout: o.ConnectTimeout,
		MemberTimeout:  o.MemberTimeout,
		Roster:         roster,
		Logger:         o.Logger,
		Registerer:     o.Registerer,
	}); err != nil {
		return nil, err
	}
	sets := make([][]int, len(cl.Layout.Sets))
	for i, s := range cl.Layout.Sets {
		sets[i] = slices.Clone(s.Members)
	}
	if n.Complete, err = completion.New(completion.Options{
		Mux: o.Mux, Store: o.Store, Nodes: cl.Size(), Incarnation: o.Incarnation,
		ControlDir: o.Store.ControlDir(),
		Scheme: record.Scheme{Kind: kind.String(), Replicas: cl.Scheme.Replicas, Parity: cl.Scheme.Parity,
			PieceSize: o.PieceSize, Sets: len(sets)},
		Sets:           sets,
		Timeout:        o.Timeout,
		ConnectTimeout: o.ConnectTimeout,
		Logger:         o.Logger,
		Registerer:     o.Registerer,
	}); err != nil {
		return closeAll(err, n.Protect)
	}
	if n.Namespace, err = namespace.New(namespace.Options{Mux: o.Mux, Store: o.Store,
		ReadCache: o.ReadCache, FetchWhole: o.FetchWhole, MemberTimeout: o.MemberTimeout,
		Roster: roster, Logger: o.Logger, Registerer: o.Registerer}); err != nil {
		return closeAll(err, n.Complete, n.Protect)
	}
	if n.Flusher, err = transfer.New(transfer.Options{
		Mux: o.Mux, Store: o.Store, Nodes: cl.Size(),
		Prefix: o.Prefix, Every: o.Every, Fetch: o.Fetch, Assembler: n.Namespace,
		Streams: o.Streams, CRC: o.CRC, Async: o.Async, Bandwidth: o.Bandwidth,
		ControlDir: o.Store.ControlDir(), Started: o.Started,
		SettleWait:     2*o.Timeout + o.ConnectTimeout,
		ConnectTimeout: o.ConnectTimeout,
		MemberTimeout:  o.MemberTimeout,
		RoundCheck:     o.RoundCheck,
		Logger:         o.Logger,
		Registerer:     o.Registerer,
	}); err != nil {
		return closeAll(err, n.Namespace, n.Complete, n.Protect)
	}
	n.Names = names.New(names.Options{Mux: o.Mux, Store: o.Store, Nodes: cl.Size(),
		Incarnation: o.Incarnation, MemberTimeout: o.MemberTimeout, Logger: o.Logger})
	n.Pointers = pointers.New(pointers.Options{Mux: o.Mux, Store: o.Store, Nodes: cl.Size(),
		ConnectTimeout: o.ConnectTimeout, Logger: o.Logger})
	// The prefix's index orders datasets across allocations: sequence
	// numbers go on after its largest.
	n.Complete.ReserveSeq(n.Flusher.IndexMax() + 1)
	n.mountCalls, n.interrupt = context.WithCancel(context.Background())
	n.recallRecords()
	o.Store.Listen(n.hear)
	return n, nil
}

// closeAll closes the protocols New made before err stopped it.
func closeAll(err error, made ...interface{ Close() }) (*Node, error) {
	for _, p := range made {
		p.Close()
	}
	return nil, err
}

// Close stops the protocols and waits for their goroutines.
func (n *Node) Close() {
	n.interrupt()
	n.Complete.Close()
	n.Protect.Close()
	n.Flusher.Close()
	n.Namespace.Close()
	n.Pointers.Close()
}
