package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/group"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/record"
)

// Store is what the namespace needs of the node-local cache; *cache.Store
// implements it.
type Store interface {
	Get(name string) *cache.Dataset
	CacheDir() string
	NodeID() string
}

// Options configure a Namespace.
type Options struct {
	Mux   *jobnet.Mux
	Store Store
	// ReadCache bounds the bytes of other nodes' files kept here.
	ReadCache int64
	// FetchWhole is the size up to which a file is fetched whole when it
	// is opened; larger ones are fetched block by block as they are read.
	FetchWhole int64
	// MemberTimeout bounds how long a read waits for a holder that is down
	// (it may come back, or be rebuilt on a replacement).
	MemberTimeout time.Duration
	// Roster finds the node that holds a share rebuilt onto another node;
	// nil: every share is served by the node that wrote it.
	Roster     *record.Roster
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// ErrNotHeld is the holder's answer when it does not hold (or no longer,
// or not yet) the share a read asks for.
var ErrNotHeld = errors.New("the node does not hold that share")

// Namespace is this node's view of every recorded dataset and its reads
// of other nodes' files. Create it with New before the transport delivers
// calls; Close it before the store.
type Namespace struct {
	o       Options
	self    int
	net     *jobnet.Protocol // this protocol's requests and streams on o.Mux
	log     *slog.Logger
	g       *group.Group
	rc      *readCache
	metrics *metrics

	mu       sync.Mutex
	views    map[string]*record.View             // by dataset
	remotes  map[string]*Remote                  // files being fetched, by read cache path
	verified map[string]map[string]*verifiedFile // files this node checked before serving them, by dataset and member/path
}

// New returns this node's Namespace and registers its request. The read
// cache starts empty: what an earlier run left there is removed.
func New(o Options) (*Namespace, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(o.Store.CacheDir(), layout.MetaDir, "readcache")
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("namespace: clear the read cache: %w", err)
	}
	n := &Namespace{
		o: o, self: o.Mux.Self(), net: o.Mux.Protocol("namespace"), log: o.Logger, g: group.New(context.Background()),
		rc: newReadCache(dir, o.ReadCache), views: map[string]*record.View{},
		remotes: map[string]*Remote{}, verified: map[string]map[string]*verifiedFile{},
	}
	n.metrics = newMetrics(o.Registerer, n)
	jobnet.Handle(n.net, "read", n.handleRead)
	return n, nil
}

// Close waits for every goroutine the Namespace started.
func (n *Namespace) Close() { n.g.Stop() }

// View returns the view of dataset name, or nil when this node holds no
// recorded copy of it (it is being written, or not here at all).
func (n *Namespace) View(name string) *record.View {
	ds := n.o.Store.Get(name)
	if ds == nil {
		return nil
	}
	info := ds.Info()
	if info.Seq == 0 {
		return nil
	}
	n.mu.Lock()
	v := n.views[name]
	n.mu.Unlock()
	if v != nil && v.Seq == info.Seq {
		return v
	}
	rec, err := record.Load(ds.Dir())
	if err != nil {
		n.log.Warn("dataset record unreadable: only this node's files are shown", "dataset", name, "err", err)
		return nil
	}
	v = record.NewView(rec, n.o.Store.NodeID())
	n.mu.Lock()
	if old := n.views[name]; old == nil || rec.Newer(old.Record) {
		n.views[name] = v
	}
	n.mu.Unlock()
	return v
}

// recordOf returns the record of ds, a recorded dataset: the one its view
// was built from (read once per revision, not once per request), or the
// error reading it gives.
func (n *Namespace) recordOf(ds *cache.Dataset) (*record.Record, error) {
	if v := n.View(ds.Name()); v != nil {
		return v.Record, nil
	}
	return record.Load(ds.Dir())
}

// holder returns the index of the node that holds e's share: the node of
// its holder's identity, else (the job has not taken stock since) the node
// that wrote it.
func (n *Namespace) holder(e *record.Entry) int {
	if n.o.Roster != nil {
		if i := n.o.Roster.Index(e.Holder); i >= 0 {
			return i
		}
	}
	return e.Node
}

// Revised forgets the view of dataset name: its record was revised (a
// share moved: the store's Revised event), and the next View reads it
// again.
func (n *Namespace) Revised(name string) {
	n.mu.Lock()
	delete(n.views, name)
	n.mu.Unlock()
}

// Drop forgets dataset name (it left the cache: the store's Removed
// event): its view and what the read
// cache holds of it.
func (n *Namespace) Drop(name string) {
	n.mu.Lock()
	delete(n.views, name)
	delete(n.verified, name)
	n.mu.Unlock()
	n.rc.dropDataset(name)
}

// SharedFiles counts the files of the datasets viewed here that several
// members wrote.
func (n *Namespace) SharedFiles() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, v := range n.views {
		c += v.SharedFiles()
	}
	return c
}
