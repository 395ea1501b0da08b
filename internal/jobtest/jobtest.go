// Package jobtest runs a job of several scrfs nodes inside one test
// process: each node has a real cache store in its own directories and a
// jobnet.Mux on a shared in-memory network (package memnet), and the test
// wires the protocols it tests on top. Nodes can be killed (network, then
// protocols, then store, as a SIGKILL leaves them), wiped and started
// again; tests wait on what the nodes' stores say, woken by every change
// rather than by sleeping.
package jobtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/jobnet/memnet"
)

// Codes are the sentinels that cross nodes in these jobs, as the daemon's.
var Codes = []jobnet.Code{
	{Name: "not_found", Err: cache.ErrNotFound},
	{Name: "read_only", Err: cache.ErrReadOnly},
	{Name: "exists", Err: cache.ErrExists},
}

// Job is a job of nodes in one process.
type Job struct {
	T     testing.TB
	Net   *memnet.Network
	Nodes []*Node

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change any node makes
}

// Node is one node of a Job. Wire is called at every Start to create the
// protocols under test on the node's Mux and Store; the function it
// returns stops them. OnComplete and OnRemove hear the store's events.
type Node struct {
	Index      int
	CacheDir   string
	ControlDir string
	Store      *Store // nil while the node is down
	Mux        *jobnet.Mux
	Mount      *Mount
	Log        *slog.Logger

	Wire       func(n *Node) (stop func())
	OnComplete func(cache.Info)
	OnRemove   func(cache.Info)
	OnRuleFire func(cache.Route, string)

	job  *Job
	stop func()
}

// New prepares a job of n nodes; none runs until Start.
func New(t testing.TB, n int, faults memnet.Faults) *Job {
	j := &Job{T: t, Net: memnet.New(faults), changed: make(chan struct{})}
	base := t.TempDir()
	for i := range n {
		dir := filepath.Join(base, fmt.Sprint("node", i))
		j.Nodes = append(j.Nodes, &Node{
			Index: i, CacheDir: filepath.Join(dir, "cache"), ControlDir: filepath.Join(dir, "control"),
			Mount: &Mount{job: j}, job: j,
			Log: slog.New(logHandler{t: t, node: i}),
		})
	}
	t.Cleanup(func() {
		for i := range j.Nodes {
			j.Kill(i)
		}
	})
	return j
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
// fails the test after timeout saying what it waited for and, from
// describe (if not nil), what it found.
func (j *Job) Wait(timeout time.Duration, what string, describe func() string, cond func() bool) {
	j.T.Helper()
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

// Start opens node i's store, wires its protocols and joins it to the
// network.
func (j *Job) Start(i int) *Node {
	j.T.Helper()
	n := j.Nodes[i]
	router, err := cache.NewRouter(regexp.MustCompile(`^(?P<dataset>[^/]+)/`))
	if err != nil {
		j.T.Fatal(err)
	}
	s, err := cache.Open(cache.Options{
		CacheDir:   jobdir.Path{Base: filepath.Dir(n.CacheDir), Names: []string{filepath.Base(n.CacheDir)}},
		ControlDir: jobdir.Path{Base: filepath.Dir(n.ControlDir), Names: []string{filepath.Base(n.ControlDir)}},
		CacheSize:  8, Router: router, Logger: n.Log,
		OnComplete: func(info cache.Info) {
			defer j.Changed()
			if n.OnComplete != nil {
				n.OnComplete(info)
			}
		},
		OnRemove: func(info cache.Info) {
			defer j.Changed()
			if n.OnRemove != nil {
				n.OnRemove(info)
			}
		},
		OnRuleFired: func(r cache.Route, reason string) {
			if n.OnRuleFire != nil {
				n.OnRuleFire(r, reason)
			}
		},
	})
	if err != nil {
		j.T.Fatalf("node %d: open store: %v", i, err)
	}
	n.Store = &Store{Store: s, job: j}
	n.Mux = jobnet.NewMux(i, Codes...)
	if n.Wire != nil {
		n.stop = n.Wire(n)
	}
	n.Mux.Attach(j.Net.Join(i, n.Mux.Serve))
	j.Changed()
	return n
}

// Kill stops node i as a crash would: its network first, then its
// protocols, then its store (whose state is as persisted).
func (j *Job) Kill(i int) {
	n := j.Nodes[i]
	if n.Store == nil {
		return
	}
	j.Net.Kill(i)
	if n.stop != nil {
		n.stop()
		n.stop = nil
	}
	n.Store.Close()
	n.Store = nil
	j.Changed()
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
	ds, _, err := n.Store.Obtain(cache.Route{Name: name, Kind: cache.KindDir, Root: name})
	if err != nil {
		t.Fatalf("node %d: obtain %s: %v", n.Index, name, err)
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

// All returns the indices of every node of the job.
func (j *Job) All() []int {
	out := make([]int, len(j.Nodes))
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
