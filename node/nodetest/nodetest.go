// Package nodetest runs a job of several scrfs nodes inside one test
// process, as package httptest runs servers beside package http: each node
// has a real cache store in its own directories, a jobnet.Mux on a shared
// in-memory network (package memnet), and is built and restored by
// package node exactly as the daemon builds and restores it, without
// FUSE. Nodes can be killed (network, then protocols, then store, as a
// SIGKILL leaves them), wiped and started again; tests wait on what the
// nodes' stores say, woken by every change rather than by sleeping.
package nodetest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/cluster"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/node"
	"github.com/scrfs/scrfs/record"
)

// Config says what job to run.
type Config struct {
	// Scheme and SetSize form the redundancy sets over the nodes.
	Scheme  layout.Scheme
	SetSize int
	// Options are every node's options (timeouts, prefix, flush); Store,
	// Mux, Cluster, Incarnation, Started and Logger are set per node.
	Options node.Options
	// PerNode changes one node's options, if not nil.
	PerNode func(node int, o *node.Options)
	// CacheSize is every node's datasets.cache_size (0: 8).
	CacheSize int
}

// Job is a job of nodes in one process.
type Job struct {
	T     testing.TB
	Net   *memnet.Network
	Nodes []*Node
	Cfg   Config

	// size is the number of nodes the job runs with now: nodes beyond it
	// keep their directories but take no part (see Resize).
	size int
	base string // where the nodes' directories are

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change any node makes
}

// Node is one node of a Job.
type Node struct {
	Index      int
	CacheDir   string
	ControlDir string
	Store      *Store // nil while the node is down
	Mux        *jobnet.Mux
	Log        *slog.Logger
	Protocols  *node.Node // nil while the node is down

	job *Job
	// stopRestore cuts short the restore Restart runs in the background,
	// and restored is closed once it has returned: Kill waits for it
	// before it closes the store under it, as a daemon's restore returns
	// before its store closes. Both nil when no restore ran.
	stopRestore context.CancelFunc
	restored    <-chan struct{}
}

// New prepares a job of n nodes; none runs until Start.
func New(t testing.TB, n int, faults memnet.Faults, cfg Config) *Job {
	j := &Job{T: t, Net: memnet.New(faults), Cfg: cfg, changed: make(chan struct{}), base: t.TempDir()}
	j.grow(n)
	t.Cleanup(func() {
		for i := range j.Nodes {
			j.Kill(i)
		}
	})
	return j
}

// grow adds nodes (with empty directories) until there are n, and runs
// the job with n.
func (j *Job) grow(n int) {
	for i := len(j.Nodes); i < n; i++ {
		dir := filepath.Join(j.base, fmt.Sprint("node", i))
		j.Nodes = append(j.Nodes, &Node{
			Index: i, CacheDir: filepath.Join(dir, "cache"), ControlDir: filepath.Join(dir, "control"),
			job: j,
			Log: slog.New(logHandler{t: j.T, node: i}),
		})
	}
	j.size = n
}

// Resize makes the job run with n nodes from its next start, as a job
// restarted on another node list: nodes 0..n-1 keep their directories
// (caches and control state), new ones start empty, and nodes beyond n
// take no part (their directories stay, for a later Resize back). Every
// node must be down.
func (j *Job) Resize(n int) {
	for _, nd := range j.Nodes {
		if nd.Store != nil {
			j.T.Fatalf("resize the job while node %d runs", nd.Index)
		}
	}
	j.grow(max(n, len(j.Nodes)))
	j.size = n
}

// Swap exchanges the directories (caches and control state) of nodes i
// and k, as a job restarted with its hosts in another order. Both must be
// down.
func (j *Job) Swap(i, k int) {
	a, b := j.Nodes[i], j.Nodes[k]
	if a.Store != nil || b.Store != nil {
		j.T.Fatalf("swap nodes %d and %d while one runs", i, k)
	}
	a.CacheDir, b.CacheDir = b.CacheDir, a.CacheDir
	a.ControlDir, b.ControlDir = b.ControlDir, a.ControlDir
}

// Changed wakes waiters: every store change calls it.
func (j *Job) Changed() {
	j.mu.Lock()
	close(j.changed)
	j.changed = make(chan struct{})
	j.mu.Unlock()
}

func (j *Job) changes() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.changed
}

// Wait waits until cond holds, evaluating it after every change, and
// fails the test after timeout, scaled (testutil.Scale), saying what it
// waited for and, from describe (if not nil), what it found.
func (j *Job) Wait(timeout time.Duration, what string, describe func() string, cond func() bool) {
	j.T.Helper()
	timeout = testutil.Scale(timeout)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch := j.changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			found := ""
			if describe != nil {
				found = ": " + describe()
			}
			j.T.Fatalf("after %v still waiting for %s%s", timeout, what, found)
		}
	}
}

// Forge has node to serve req as a request of kind (as on the wire:
// "completion.begin") from node from, and returns the answer as it would
// travel back: for requests no protocol sends, made up by a test.
func (j *Job) Forge(from, to int, kind string, req any) string {
	j.T.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		j.T.Fatal(err)
	}
	answer, err := j.Nodes[to].Mux.Serve(context.Background(), from, kind, body)
	if err != nil {
		j.T.Fatalf("node %d serving %s: %v", to, kind, err)
	}
	return string(answer)
}

// Start opens node i's store, builds the node and joins it to the
// network. It does not restore anything (see Restart).
func (j *Job) Start(i int) *Node {
	j.T.Helper()
	n := j.Nodes[i]
	router, err := cache.NewRouter(regexp.MustCompile(`^(?P<dataset>[^/]+)/`))
	if err != nil {
		j.T.Fatal(err)
	}
	run := jobnet.NewToken()
	s, err := cache.Open(cache.Options{
		CacheDir: pathOf(n.CacheDir), ControlDir: pathOf(n.ControlDir), CacheSize: cmp.Or(j.Cfg.CacheSize, 8),
		Router: router, Logger: n.Log,
		Incarnation: run,
	})
	if err != nil {
		j.T.Fatalf("node %d: open store: %v", i, err)
	}
	n.Store = &Store{Store: s, job: j}
	n.Mux = jobnet.NewMux(i, node.ErrorCodes...)
	o := j.Cfg.Options
	o.ReadCache = cmp.Or(o.ReadCache, 1<<30)
	o.Store, o.Mux, o.Incarnation, o.Started, o.Logger = n.Store, n.Mux, run, time.Now(), n.Log
	if o.Cluster, err = clusterOf(i, j.size, j.Cfg.Scheme, j.Cfg.SetSize); err != nil {
		j.T.Fatal(err)
	}
	if j.Cfg.PerNode != nil {
		j.Cfg.PerNode(i, &o)
	}
	if n.Protocols, err = node.New(o); err != nil {
		j.T.Fatalf("node %d: %v", i, err)
	}
	n.Mux.Attach(j.Net.Join(i, n.Mux.Serve))
	j.Changed()
	return n
}

// Restart starts node i as the daemon does: restore runs in the background
// (as a node's restore runs while the others carry on), then flushes
// start. The channel closes when the restore is over, or cut off: the
// node may be killed while it restores.
func (j *Job) Restart(i int) <-chan struct{} {
	j.T.Helper()
	n := j.Start(i)
	pr := n.Protocols
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.stopRestore, n.restored = cancel, done
	go func() {
		defer close(done)
		pr.Restore(ctx, true)
	}()
	return done
}

// RestartAll restarts every node of the job at once and waits for their
// restores.
func (j *Job) RestartAll() {
	var done []<-chan struct{}
	for i := range j.size {
		done = append(done, j.Restart(i))
	}
	for _, d := range done {
		<-d
	}
}

// Kill stops node i as a crash would: its restore (if one runs) and its
// protocols first (their contexts end, so nothing they were doing goes on
// to act on the calls that now fail: a killed daemon persists nothing
// after the kill), then its network (calls to it fail as a broken link
// would), then, once the restore has returned, its store (whose state is
// as persisted).
func (j *Job) Kill(i int) {
	n := j.Nodes[i]
	if n.Store == nil {
		return
	}
	if n.stopRestore != nil {
		n.stopRestore()
	}
	n.Protocols.Close()
	j.Net.Kill(i)
	n.Protocols = nil
	if n.restored != nil {
		<-n.restored
	}
	n.stopRestore, n.restored = nil, nil
	n.Store.Close()
	n.Store = nil
	j.Changed()
}

// clusterOf is node self's view of a job of n nodes on memnet.
func clusterOf(self, n int, s layout.Scheme, setSize int) (*cluster.Cluster, error) {
	nodes, err := layout.NewNodes(n, nil)
	if err != nil {
		return nil, err
	}
	if s.Kind == layout.KindSingle {
		setSize = 1
	}
	l, err := layout.Build(nodes, setSize)
	if err != nil {
		return nil, err
	}
	return &cluster.Cluster{Addrs: make([]string, n), Self: self, Scheme: s, Nodes: nodes, Layout: l, Source: "nodetest"}, nil
}

// Wipe removes node i's cache and control directories, as a replaced node
// has neither. The node must be down.
func (j *Job) Wipe(i int) {
	n := j.Nodes[i]
	if n.Store != nil {
		j.T.Fatalf("wipe node %d while it runs", i)
	}
	for _, d := range []string{n.CacheDir, n.ControlDir} {
		if err := os.RemoveAll(d); err != nil {
			j.T.Fatal(err)
		}
	}
}

// Write creates dataset name on the node (a directory at the mount's root)
// with the given files, as an application writing through the mount would:
// each file opened, written and closed.
func (n *Node) Write(name string, files map[string][]byte) {
	t := n.job.T
	t.Helper()
	ds, err := n.Begin(name)
	if err != nil {
		t.Fatalf("node %d: %v", n.Index, err)
	}
	for rel, data := range files {
		if err := ds.OpenWrite(); err != nil {
			t.Fatalf("node %d: %s/%s: %v", n.Index, name, rel, err)
		}
		p := filepath.Join(ds.Dir(), rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ds.CloseWrite(rel, int64(len(data)), true)
	}
}

// WriteAt writes data at off of file rel of writing dataset name (made
// empty if it is not there), as a writer through the daemon does, which
// notes the range it wrote: a file several nodes write (MPI-IO).
func (n *Node) WriteAt(name, rel string, off int64, data []byte) {
	t := n.job.T
	t.Helper()
	ds, err := n.Begin(name)
	if err != nil {
		t.Fatalf("node %d: %v", n.Index, err)
	}
	if err := ds.OpenWrite(); err != nil {
		t.Fatalf("node %d: %s/%s: %v", n.Index, name, rel, err)
	}
	p := filepath.Join(ds.Dir(), rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := f.Stat()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	after, _ := f.Stat()
	f.Close()
	var w files.Ranges
	w.Add(off, int64(len(data)))
	ds.Wrote(rel, &w, false)
	ds.CloseWrite(rel, after.Size()-before.Size(), before.Size() == 0)
}

// Begin returns writing dataset name (a directory at the mount's root),
// starting it as the mount does when the application makes its directory
// here: the job hears of it first, then the store creates it.
func (n *Node) Begin(name string) (*cache.Dataset, error) {
	r := cache.Route{Name: name, Kind: cache.KindDir, Root: name}
	if ds, err := n.Store.Writing(r); ds != nil || err != nil {
		return ds, err
	}
	if err := n.Protocols.Begin(context.Background(), r); err != nil {
		return nil, fmt.Errorf("begin %s: %w", name, err)
	}
	ds, _, err := n.Store.Obtain(r)
	return ds, err
}

// Rename renames writing dataset from to to as the mount does when the
// application renames its directory here: on the other nodes first.
func (n *Node) Rename(from, to string) error {
	ds := n.Store.Get(from)
	if ds == nil {
		return fmt.Errorf("rename %s: %w", from, cache.ErrNotFound)
	}
	r := cache.Route{Name: to, Kind: cache.KindDir, Root: to}
	if err := n.Protocols.Rename(context.Background(), from, r); err != nil {
		return err
	}
	return n.Store.Rename(ds, r)
}

// Sums returns the sha256 of every regular file of dataset name on the
// node, by path, or nil if the node does not hold it.
func (n *Node) Sums(name string) map[string]string {
	t := n.job.T
	t.Helper()
	ds := n.Store.Get(name)
	if ds == nil {
		return nil
	}
	out := map[string]string{}
	root := ds.Dir()
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if e.IsDir() && strings.HasPrefix(rel, ".scrfs") {
			return filepath.SkipDir
		}
		if e.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[filepath.ToSlash(rel)] = hex.EncodeToString(sum[:])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("node %d: read %s: %v", n.Index, name, err)
	}
	return out
}

// State returns dataset name's state and reason on the node ("" if it does
// not hold it, or the node is down).
func (n *Node) State(name string) (cache.State, string) {
	if n.Store == nil {
		return "", ""
	}
	if ds := n.Store.Get(name); ds != nil {
		info := ds.Info()
		return info.State, info.Reason
	}
	for _, f := range n.Store.Failures() {
		if f.Name == name {
			return f.State, f.Reason
		}
	}
	return "", ""
}

// WaitState waits until dataset name is in state st on every node of idx.
func (j *Job) WaitState(timeout time.Duration, name string, st cache.State, idx ...int) {
	j.T.Helper()
	j.Wait(timeout, fmt.Sprintf("%s %s on nodes %v", name, st, idx), func() string { return j.Describe(name) }, func() bool {
		for _, i := range idx {
			if got, _ := j.Nodes[i].State(name); got != st {
				return false
			}
		}
		return true
	})
}

// Describe says what every node holds of dataset name, for failure messages.
func (j *Job) Describe(name string) string {
	var parts []string
	for _, n := range j.Nodes {
		st, why := n.State(name)
		parts = append(parts, fmt.Sprintf("node %d: %s %s", n.Index, st, why))
	}
	return strings.Join(parts, "; ")
}

// All returns the indices of every node the job runs with.
func (j *Job) All() []int {
	out := make([]int, j.size)
	for i := range out {
		out[i] = i
	}
	return out
}

// Ctx returns a context that ends with the test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// pathOf is the jobdir.Path of a node's directory under the test's
// temporary directory.
func pathOf(dir string) jobdir.Path {
	return jobdir.Path{Base: filepath.Dir(dir), Names: []string{filepath.Base(dir)}}
}

// ReadFile reads entry e of dataset through node i's namespace, whole: from
// a local copy, or fetched from its holder in reads of chunk bytes.
func (j *Job) ReadFile(ctx context.Context, i int, dataset string, e *record.Entry, chunk int) ([]byte, error) {
	local, r, err := j.Nodes[i].Protocols.Namespace.Open(ctx, dataset, e)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return os.ReadFile(local)
	}
	defer r.Close()
	var out []byte
	for {
		k, err := r.Await(ctx, int64(len(out)), chunk)
		if err != nil || k == 0 {
			return out, err
		}
		b := make([]byte, k)
		if _, err := syscall.Pread(int(r.Fd()), b, int64(len(out))); err != nil {
			return out, err
		}
		out = append(out, b...)
	}
}
