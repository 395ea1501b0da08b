package main

import (
	"bufio"
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

	"github.com/scrfs/scrfs/internal/loopback"
)

// jobID names the benchmark's job; it is part of the cache paths.
const jobID = "redbench"

// node is one scrfs daemon process and its directories, all under dir.
type node struct {
	index                   int
	mnt, cacheBase, ctlBase string
	env                     []string // SCRFS_* settings of this node

	cmd     *exec.Cmd
	log     *logWatch
	started time.Time // just before the process was started
}

// cluster is a job of daemons on 127.0.0.1..N that form one redundancy set.
type cluster struct {
	bin   string
	nodes []*node
	hosts []string       // IP of each node
	echo  io.Writer      // daemons' warnings go here when not nil
	wg    sync.WaitGroup // the processes' waiters
}

// newCluster lays out n nodes under work with the given scheme settings;
// nothing runs until start.
func newCluster(bin, work string, n, port int, sch scheme, settings []string, echo io.Writer) (*cluster, error) {
	c := &cluster{bin: bin, echo: echo}
	var addrs []string
	for i := range n {
		c.hosts = append(c.hosts, loopback.IP(i))
		addrs = append(addrs, net.JoinHostPort(loopback.IP(i), strconv.Itoa(port)))
	}
	common := append([]string{
		"SCRFS_JOB_ID=" + jobID,
		"SCRFS_JOB_SECRET=redbench-secret-0123456789abcdef",
		"SCRFS_CLUSTER_NODES=" + strings.Join(addrs, ","),
		"SCRFS_METRICS_LISTEN=",
		"SCRFS_LOG_FORMAT=json",
		"SCRFS_LOG_LEVEL=info",
		// Only the marker completes a dataset, and only the newest stays
		// in cache: the previous one is evicted as the next completes, so
		// /dev/shm holds at most two checkpoints and a restart rebuilds one.
		"SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_DATASETS_CACHE_SIZE=1",
		"SCRFS_FLUSH_EVERY=0",
		"SCRFS_REDUNDANCY_SET_SIZE=" + strconv.Itoa(n),
		"SCRFS_RESTART_MEMBER_TIMEOUT=60s",
	}, sch.env()...)
	common = append(common, settings...) // last, so they win
	for i := range n {
		dir := filepath.Join(work, fmt.Sprintf("node%d", i))
		nd := &node{
			index:     i,
			mnt:       filepath.Join(dir, "mnt"),
			cacheBase: filepath.Join(dir, "cache"),
			ctlBase:   filepath.Join(dir, "control"),
		}
		nd.env = append(slices.Clone(common),
			"SCRFS_PATHS_CACHE_BASE="+nd.cacheBase,
			"SCRFS_PATHS_CONTROL_BASE="+nd.ctlBase,
			fmt.Sprintf("SCRFS_CLUSTER_NODE_INDEX=%d", i))
		if err := os.MkdirAll(nd.mnt, 0o755); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, nd)
	}
	return c, nil
}

// start starts every daemon and waits until all are ready.
func (c *cluster) start(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := c.spawn(n); err != nil {
			return err
		}
	}
	// All nodes at once: one that exits (its port taken, say) fails the
	// start with its own log, rather than its peers timing out waiting for it.
	if _, err := c.waitAll(ctx, 60*time.Second, isReady, nil); err != nil {
		return fmt.Errorf("cluster not ready: %w", err)
	}
	return nil
}

func isReady(e event) bool { return e.Msg == "scrfs ready" }

// spawn starts node n's daemon without waiting for it. Its stdout and
// stderr share one pipe read by the node's logWatch.
func (c *cluster) spawn(n *node) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, "mount", n.mnt)
	cmd.Env = append(environWithout("SCRFS_"), n.env...)
	cmd.Stdout, cmd.Stderr = w, w
	// Should the driver die, its daemons (and their mounts) go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	n.log = newLogWatch(fmt.Sprintf("node %d", n.index), c.echo)
	n.started = time.Now()
	err = cmd.Start()
	w.Close() // the child holds its own copy; EOF comes when it exits
	if err != nil {
		r.Close()
		return fmt.Errorf("start node %d: %w", n.index, err)
	}
	n.cmd = cmd
	go func() {
		n.log.consume(r)
		r.Close()
	}()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		cmd.Wait()
	}()
	return nil
}

// ready waits for node n's "scrfs ready" line.
func (c *cluster) ready(ctx context.Context, n *node) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := n.log.wait(ctx, isReady, nil); err != nil {
		return fmt.Errorf("node %d not ready: %w\n%s", n.index, err, n.log.tail(20))
	}
	return nil
}

// waitAll waits on every node for the first event match accepts, failing
// early on one fail accepts; it returns the events by node.
func (c *cluster) waitAll(ctx context.Context, timeout time.Duration, match, fail func(event) bool) ([]event, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make([]event, len(c.nodes))
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = n.log.wait(ctx, match, fail)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("%w\n%s", err, c.nodes[i].log.tail(15))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// kill ends node i as a crash would (SIGKILL), detaches the mount it leaves
// behind and wipes its cache and control directories: the node is lost.
func (c *cluster) kill(i int) error {
	n := c.nodes[i]
	if n.cmd == nil {
		return nil
	}
	n.cmd.Process.Kill()
	<-n.log.done
	syscall.Unmount(n.mnt, syscall.MNT_DETACH)
	n.cmd = nil
	return errors.Join(os.RemoveAll(n.cacheBase), os.RemoveAll(n.ctlBase))
}

// stop ends every daemon with SIGTERM (SIGKILL after 30 s) and detaches
// whatever mount is left.
func (c *cluster) stop() {
	for _, n := range c.nodes {
		if n.cmd != nil {
			n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.log.done:
		case <-time.After(30 * time.Second):
			n.cmd.Process.Kill()
			<-n.log.done
		}
		syscall.Unmount(n.mnt, syscall.MNT_DETACH)
		n.cmd = nil
	}
	c.wg.Wait()
}

// peakRSS returns node n's VmHWM in bytes, the process's peak resident set.
func (n *node) peakRSS() (int64, error) {
	if n.cmd == nil {
		return 0, fmt.Errorf("node %d is not running", n.index)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return parseKB(v)
		}
	}
	return 0, fmt.Errorf("node %d: no VmHWM in /proc status", n.index)
}

// clockTick is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100
// on every Linux architecture scrfs runs on (getconf CLK_TCK).
const clockTick = 10 * time.Millisecond

// usage is what a process consumed so far.
type usage struct {
	cpu    time.Duration // user + system
	faults int64         // minor + major page faults
}

func (u usage) sub(v usage) usage { return usage{u.cpu - v.cpu, u.faults - v.faults} }

// usage returns what node n's daemon consumed so far.
func (n *node) usage() (usage, error) {
	if n.cmd == nil {
		return usage{}, fmt.Errorf("node %d is not running", n.index)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
	if err != nil {
		return usage{}, err
	}
	return parseStat(string(b))
}

// parseStat reads a /proc/PID/stat line. The command name (field 2) is in
// parentheses and may hold spaces, so fields are counted from the last ')':
// minflt and majflt are fields 10 and 12, utime and stime 14 and 15.
func parseStat(stat string) (usage, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return usage{}, fmt.Errorf("unexpected /proc stat %.40q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return usage{}, fmt.Errorf("unexpected /proc stat %.40q", stat)
	}
	num := func(k int) (int64, error) {
		v, err := strconv.ParseInt(f[k-3], 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("unexpected /proc stat field %d %q", k, f[k-3])
		}
		return v, nil
	}
	var vals [4]int64
	for j, k := range []int{10, 12, 14, 15} {
		v, err := num(k)
		if err != nil {
			return usage{}, err
		}
		vals[j] = v
	}
	return usage{cpu: time.Duration(vals[2]+vals[3]) * clockTick, faults: vals[0] + vals[1]}, nil
}

// usage returns what all daemons consumed so far.
func (c *cluster) usage() (usage, error) {
	var sum usage
	for _, n := range c.nodes {
		u, err := n.usage()
		if err != nil {
			return usage{}, err
		}
		sum.cpu += u.cpu
		sum.faults += u.faults
	}
	return sum, nil
}

// parseKB parses the value of a /proc/PID/status memory line ("  1234 kB").
func parseKB(v string) (int64, error) {
	f := strings.Fields(v)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("unexpected /proc status value %q", v)
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || kb < 0 {
		return 0, fmt.Errorf("unexpected /proc status value %q", v)
	}
	return kb << 10, nil
}

// selfCPU returns this process's CPU time (user+system) so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
