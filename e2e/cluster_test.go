package e2e

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/loopback"
)

// Cluster is a job of several daemons, each on its own loopback address
// (127.0.0.1, 127.0.0.2, …) with its own mount, cache and control dirs.
type Cluster struct {
	t     *testing.T
	Nodes []*Node
	Addrs []string
}

// NewCluster prepares n daemons that know each other; env applies to all.
func NewCluster(t *testing.T, n int, env ...string) *Cluster {
	t.Helper()
	// One address more than nodes: replace may start a node on a spare host.
	port := strconv.Itoa(freePort(t, n+1))
	c := &Cluster{t: t}
	for i := range n {
		c.Addrs = append(c.Addrs, net.JoinHostPort(loopback.IP(i), port))
	}
	common := append([]string{
		"SCRFS_CLUSTER_NODES=" + strings.Join(c.Addrs, ","),
		"SCRFS_JOB_SECRET=e2e-secret-0123456789abcdef",
		"SCRFS_CLUSTER_HEARTBEAT=500ms",
		"SCRFS_CLUSTER_IO_TIMEOUT=10s",
		"SCRFS_CLUSTER_CONNECT_TIMEOUT=10s",
		"SCRFS_REDUNDANCY_TIMEOUT=10s",
	}, env...)
	for i := range n {
		c.Nodes = append(c.Nodes, NewNode(t, append(common, fmt.Sprintf("SCRFS_CLUSTER_NODE_INDEX=%d", i))...))
	}
	return c
}

// Start starts every daemon and waits until all are ready.
func (c *Cluster) Start() *Cluster {
	c.t.Helper()
	for _, n := range c.Nodes {
		n.StartNoWait()
	}
	for _, n := range c.Nodes {
		n.WaitReady(30 * time.Second)
	}
	return c
}

// WaitAll waits until every node logged a line with all parts.
func (c *Cluster) WaitAll(timeout time.Duration, parts ...string) {
	c.t.Helper()
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := n.log.wait(timeout, n.exited, parts...); !ok {
				c.t.Errorf("node %s: no log line with %q within %v", n.Mount, parts, timeout)
			}
		}()
	}
	wg.Wait()
	if c.t.Failed() {
		c.t.FailNow()
	}
}

// freePort finds a TCP port free on the first n loopback addresses.
func freePort(t *testing.T, n int) int {
	t.Helper()
	port, err := loopback.FreePort(n)
	if err != nil {
		t.Fatal(err)
	}
	return port
}
