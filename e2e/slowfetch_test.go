package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/s3test"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/prefix"
)

// TestMountWaitsForLongFetch: on a new allocation whose checkpoint takes
// longer to fetch than restart.member_timeout (the prefix slowed down),
// the mount's first listing waits for the fetch and shows the checkpoint,
// never an empty mount a framework would take for no checkpoint at all;
// meanwhile `scrfs status` shows the fetch's progress.
func TestMountWaitsForLongFetch(t *testing.T) {
	srv := s3test.Start(t)
	requireFUSE(t)
	const memberTimeout = 2 * time.Second
	px := startThrottledProxy(t, srv.Addr, 2<<20)
	c := s3Cluster(t, srv, 2, "slow", "AWS_ENDPOINT_URL_S3=http://"+px.addr(),
		"SCRFS_RESTART_MEMBER_TIMEOUT="+memberTimeout.String()).Start()
	must(t, os.Mkdir(c.Nodes[0].Path("ckpt.1"), 0o755))
	// Files of 64 KiB, as a sharded checkpoint's: each one fetched is
	// progress (a part of a file is reported once its range is in), and
	// with a node's parallel GETs sharing the slowed link one completes
	// every few tens of milliseconds.
	for i, n := range c.Nodes {
		for j := range 96 {
			writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d", i), fmt.Sprintf("shard_%d.bin", j)), 64<<10, uint64(100*i+j+1))
		}
	}
	completeOn(t, c, "ckpt.1")
	all, _ := union(t, clusterSums(t, c, "ckpt.1"))
	if out, errs, code := c.Nodes[0].CLI("flush", "--wait", "ckpt.1"); code != 0 {
		t.Fatalf("scrfs flush --wait: exit %d: %s%s", code, out, errs)
	}
	for _, n := range c.Nodes {
		must(t, n.Stop())
		wipe(t, n)
	}

	px.slow.Store(true) // 12 MiB at 2 MiB/s: about 6 s, thrice the bound
	for _, n := range c.Nodes {
		n.StartNoWait()
	}
	n0 := c.Nodes[0]
	testutil.Eventually(t, 30*time.Second, "node 0's mount appears", func() bool { return mounted(n0.Mount) })
	type listing struct {
		names []string
		err   error
		took  time.Duration
	}
	listed := make(chan listing, 1)
	go func() {
		start := time.Now()
		entries, err := os.ReadDir(n0.Mount)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		listed <- listing{names, err, time.Since(start)}
	}()
	sawFetching := false
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var l listing
wait:
	for {
		select {
		case l = <-listed:
			break wait
		case <-tick.C:
			if f := n0.Status().Node.Fetching; f != nil && f.Dataset == "ckpt.1" && f.TotalBytes > 0 {
				sawFetching = true
			}
		}
	}
	if l.err != nil || !slices.Equal(l.names, []string{"ckpt.1"}) {
		t.Fatalf("node 0's mount listed %v (%v) after %v, want ckpt.1", l.names, l.err, l.took)
	}
	if l.took < memberTimeout {
		t.Fatalf("the listing waited %v, less than restart.member_timeout %v: the fetch was not slow enough to test the bound", l.took, memberTimeout)
	}
	if !sawFetching {
		t.Error("scrfs status never showed the fetch of ckpt.1 while the mount waited for it")
	}
	c.WaitAll(60*time.Second, "scrfs ready")
	for i, n := range c.Nodes {
		sameSums(t, fmt.Sprintf("ckpt.1 through node %d's mount", i), treeSums(t, n.Path("ckpt.1")), all)
	}
}

// throttledProxy forwards TCP connections to a server; while slow is set,
// the bytes towards its clients pass at most at one rate over all
// connections (a prefix slower than the checkpoint is large).
type throttledProxy struct {
	ln   net.Listener
	to   string
	slow atomic.Bool
	lim  *prefix.Limiter

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// startThrottledProxy listens on loopback for connections to forward to
// addr, bytesPerSec towards the clients while slow; it stops with the test.
func startThrottledProxy(t *testing.T, addr string, bytesPerSec int64) *throttledProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &throttledProxy{ln: ln, to: addr, lim: prefix.NewLimiter(bytesPerSec)}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *throttledProxy) addr() string { return p.ln.Addr().String() }

func (p *throttledProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.to)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(server, client)
			server.(*net.TCPConn).CloseWrite()
		}()
		go func() {
			defer p.wg.Done()
			p.copyThrottled(client, server)
			client.(*net.TCPConn).CloseWrite()
		}()
	}
}

// copyThrottled copies src to dst, waiting for the limiter while slow.
func (p *throttledProxy) copyThrottled(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.slow.Load() {
				p.lim.Wait(context.Background(), n)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops accepting, cuts every connection and waits for the copies.
func (p *throttledProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
