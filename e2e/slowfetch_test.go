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

// TestCheckpointReadAtStart: on a new allocation (caches empty, the
// checkpoint in a prefix slower than the checkpoint is large), the mount
// shows the checkpoint before it is fetched, never an empty mount a
// framework would take for no checkpoint at all: the first listing names
// it while the fetch is still running, and a rank reading the tail of its
// file first (as a zip reader does) gets the right bytes at once, read
// from the prefix ahead of the fetch and checked; `scrfs status` shows
// the fetch's progress meanwhile, and everything reads back identical.
func TestCheckpointReadAtStart(t *testing.T) {
	srv := s3test.Start(t)
	requireFUSE(t)
	px := startThrottledProxy(t, srv.Addr, 4<<20)
	c := s3Cluster(t, srv, 2, "slow", "AWS_ENDPOINT_URL_S3=http://"+px.addr(), "SCRFS_METRICS_LISTEN=127.0.0.1:0").Start()
	must(t, os.Mkdir(c.Nodes[0].Path("ckpt.1"), 0o755))
	// A large file a node, of three blocks, and small ones beside it.
	for i, n := range c.Nodes {
		writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 3*prefix.BlockSize-1000, uint64(i+1))
		for j := range 8 {
			writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d", i), fmt.Sprintf("shard_%d.bin", j)), 64<<10, uint64(100*i+j+1))
		}
	}
	completeOn(t, c, "ckpt.1")
	all, _ := union(t, clusterSums(t, c, "ckpt.1"))
	tail := make([]byte, 4096)
	{
		f, err := os.Open(c.Nodes[1].Path("ckpt.1", "rank_1.bin"))
		must(t, err)
		_, err = f.ReadAt(tail, 3*prefix.BlockSize-1000-int64(len(tail)))
		f.Close()
		must(t, err)
	}
	if out, errs, code := c.Nodes[0].CLI("flush", "--wait", "ckpt.1"); code != 0 {
		t.Fatalf("scrfs flush --wait: exit %d: %s%s", code, out, errs)
	}
	for _, n := range c.Nodes {
		must(t, n.Stop())
		wipe(t, n)
	}

	px.slow.Store(true) // 25 MiB at 4 MiB/s: about 6 s
	for _, n := range c.Nodes {
		n.StartNoWait()
	}
	n0, n1 := c.Nodes[0], c.Nodes[1]
	testutil.Eventually(t, 30*time.Second, "the mounts appear", func() bool { return mounted(n0.Mount) && mounted(n1.Mount) })
	entries, err := os.ReadDir(n0.Mount)
	must(t, err)
	if len(entries) != 1 || entries[0].Name() != "ckpt.1" {
		t.Fatalf("node 0's first listing: %v, want ckpt.1", entries)
	}
	f, err := os.Open(n1.Path("ckpt.1", "rank_1.bin"))
	must(t, err)
	got := make([]byte, len(tail))
	_, err = f.ReadAt(got, 3*prefix.BlockSize-1000-int64(len(tail)))
	f.Close()
	must(t, err)
	if !slices.Equal(got, tail) {
		t.Fatal("the tail of rank_1.bin read during the fetch differs from what was written")
	}
	st := n1.Status().Node
	if st.Fetching == nil || st.Fetching.DoneBytes >= st.Fetching.TotalBytes {
		t.Fatalf("node 1's fetch was over (%+v) before its first read returned: the prefix was not slow enough to test it", st.Fetching)
	}
	c.WaitAll(60*time.Second, "scrfs ready")
	if got := metric(t, n1, "scrfs_fetch_demand_bytes_total"); got < prefix.BlockSize-1000 {
		t.Errorf("scrfs_fetch_demand_bytes_total %v on node 1, want its last block read ahead of the fetch", got)
	}
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
