package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/cluster"
	"github.com/scrfs/scrfs/internal/loopback"
	"github.com/scrfs/scrfs/layout"
)

// Spec describes a job of daemons.
type Spec struct {
	Bin   string // the scrfs binary
	Dir   string // every node's directories go below it
	Nodes int    // daemons, on 127.0.0.1..N
	Port  int    // the peer port on every node's address
	JobID string // part of the cache paths
	// Settings are SCRFS_* settings for every daemon, applied after the
	// job's own (id, secret, nodes, JSON log at info), so they win.
	Settings []string
	Echo     io.Writer // the daemons' warnings and errors go here when not nil
}

// Node is one scrfs daemon process and its directories.
type Node struct {
	Index                         int
	Mount, CacheBase, ControlBase string
	Env                           []string // SCRFS_* settings of this node

	cmd     *exec.Cmd
	log     *Log
	started time.Time // just before the process was started
}

// Log returns the node's current (or last) daemon's log.
func (n *Node) Log() *Log { return n.log }

// Started returns when the node's daemon was last started.
func (n *Node) Started() time.Time { return n.started }

// CacheDir returns the node's job cache directory, where its datasets live:
// <cache base>/<user>/scrfs.<job>.
func (n *Node) CacheDir(jobID string) string {
	return layout.JobDir(n.CacheBase, cluster.UserName(), jobID)
}

// Cluster is a job of daemons on 127.0.0.1..N.
type Cluster struct {
	Nodes []*Node

	bin  string
	echo io.Writer
	wg   sync.WaitGroup // the processes' waiters
}

// Bin returns the scrfs binary the cluster runs.
func (c *Cluster) Bin() string { return c.bin }

// New lays out the nodes of spec; nothing runs until Start.
func New(spec Spec) (*Cluster, error) {
	c := &Cluster{bin: spec.Bin, echo: spec.Echo}
	var addrs []string
	for i := range spec.Nodes {
		addrs = append(addrs, net.JoinHostPort(loopback.IP(i), strconv.Itoa(spec.Port)))
	}
	common := append([]string{
		"SCRFS_JOB_ID=" + spec.JobID,
		"SCRFS_JOB_SECRET=" + spec.JobID + "-secret-0123456789abcdef",
		"SCRFS_CLUSTER_NODES=" + strings.Join(addrs, ","),
		"SCRFS_METRICS_LISTEN=",
		"SCRFS_LOG_FORMAT=json",
		"SCRFS_LOG_LEVEL=info",
	}, spec.Settings...)
	for i := range spec.Nodes {
		dir := filepath.Join(spec.Dir, fmt.Sprintf("node%d", i))
		nd := &Node{
			Index:       i,
			Mount:       filepath.Join(dir, "mnt"),
			CacheBase:   filepath.Join(dir, "cache"),
			ControlBase: filepath.Join(dir, "control"),
		}
		nd.Env = append(slices.Clone(common),
			"SCRFS_PATHS_CACHE_BASE="+nd.CacheBase,
			"SCRFS_PATHS_CONTROL_BASE="+nd.ControlBase,
			fmt.Sprintf("SCRFS_CLUSTER_NODE_INDEX=%d", i))
		if err := os.MkdirAll(nd.Mount, 0o755); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, nd)
	}
	return c, nil
}

// Start starts every daemon and waits until all are ready.
func (c *Cluster) Start(ctx context.Context) error {
	for _, n := range c.Nodes {
		if err := c.Spawn(n); err != nil {
			return err
		}
	}
	// All nodes at once: one that exits (its port taken, say) fails the
	// start with its own log, rather than its peers timing out waiting for it.
	if _, err := c.WaitAll(ctx, 60*time.Second, isReady, nil); err != nil {
		return fmt.Errorf("cluster not ready: %w", err)
	}
	return nil
}

func isReady(e Event) bool { return e.Msg == "scrfs ready" }

// Spawn starts node n's daemon without waiting for it. Its stdout and
// stderr share one pipe read by the node's Log.
func (c *Cluster) Spawn(n *Node) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, "mount", n.Mount)
	cmd.Env = append(environWithout("SCRFS_"), n.Env...)
	cmd.Stdout, cmd.Stderr = w, w
	// Should the driver die, its daemons (and their mounts) go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	n.log = NewLog(fmt.Sprintf("node %d", n.Index), c.echo)
	n.started = time.Now()
	err = cmd.Start()
	w.Close() // the child holds its own copy; EOF comes when it exits
	if err != nil {
		r.Close()
		return fmt.Errorf("start node %d: %w", n.Index, err)
	}
	n.cmd = cmd
	go func() {
		n.log.Consume(r)
		r.Close()
	}()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		cmd.Wait()
	}()
	return nil
}

// Ready waits for node n's "scrfs ready" line.
func (c *Cluster) Ready(ctx context.Context, n *Node) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := n.log.Wait(ctx, isReady, nil); err != nil {
		return fmt.Errorf("node %d not ready: %w\n%s", n.Index, err, n.log.Tail(20))
	}
	return nil
}

// WaitAll waits on every node for the first event match accepts, failing
// early on one fail accepts; it returns the events by node.
func (c *Cluster) WaitAll(ctx context.Context, timeout time.Duration, match, fail func(Event) bool) ([]Event, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make([]Event, len(c.Nodes))
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = n.log.Wait(ctx, match, fail)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("%w\n%s", err, c.Nodes[i].log.Tail(15))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Kill ends node i as a crash would (SIGKILL), detaches the mount it leaves
// behind and wipes its cache and control directories: the node is lost.
func (c *Cluster) Kill(i int) error {
	n := c.Nodes[i]
	if n.cmd == nil {
		return nil
	}
	n.cmd.Process.Kill()
	<-n.log.Done()
	syscall.Unmount(n.Mount, syscall.MNT_DETACH)
	n.cmd = nil
	return errors.Join(os.RemoveAll(n.CacheBase), os.RemoveAll(n.ControlBase))
}

// Stop ends every daemon with SIGTERM (SIGKILL after 30 s) and detaches
// whatever mount is left.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		if n.cmd != nil {
			n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.log.Done():
		case <-time.After(30 * time.Second):
			n.cmd.Process.Kill()
			<-n.log.Done()
		}
		syscall.Unmount(n.Mount, syscall.MNT_DETACH)
		n.cmd = nil
	}
	c.wg.Wait()
}

// Pid returns the process id of node n's daemon, or an error when it is
// not running.
func (n *Node) Pid() (int, error) {
	if n.cmd == nil {
		return 0, fmt.Errorf("node %d is not running", n.Index)
	}
	return n.cmd.Process.Pid, nil
}

// Command returns the scrfs CLI (args) set up as node n's daemon is, so it
// reaches that daemon's control socket.
func (c *Cluster) Command(ctx context.Context, n *Node, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = append(environWithout("SCRFS_"), n.Env...)
	return cmd
}

// environWithout returns the environment minus variables with prefix, so
// settings of the caller's own scrfs do not leak into the benchmark's.
func environWithout(prefix string) []string {
	var out []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}
