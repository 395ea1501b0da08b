package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/scrfs/scrfs/internal/s3test"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/prefix"
)

// TestCheckpointReadAtStart: on a new allocation (caches empty, the
// checkpoint in a prefix slower than the checkpoint is large), the mount
// shows the checkpoint before it is fetched, never an empty mount a
// framework would take for no checkpoint at all: the first listing names
// it and the pointer file kept with it while the fetch is still running,
// every node reads that pointer file, and a rank reading the tail of its
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
	must(t, os.WriteFile(c.Nodes[0].Path("latest"), []byte("ckpt.1"), 0o644)) // as DeepSpeed's pointer
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
	restartWipedSlow(t, c, px) // 25 MiB at 4 MiB/s: about 6 s
	n0, n1 := c.Nodes[0], c.Nodes[1]
	testutil.Eventually(t, 30*time.Second, "the mounts appear", func() bool { return mounted(n0.Mount) && mounted(n1.Mount) })
	entries, err := os.ReadDir(n0.Mount)
	must(t, err)
	if len(entries) != 2 || entries[0].Name() != "ckpt.1" || entries[1].Name() != "latest" {
		t.Fatalf("node 0's first listing: %v, want ckpt.1 and latest", entries)
	}
	if b, err := os.ReadFile(n1.Path("latest")); err != nil || string(b) != "ckpt.1" {
		t.Fatalf("node 1's latest during the fetch: %q, %v", b, err)
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

// restartWipedSlow stops every node, wipes its cache, slows the prefix
// down and starts the job again without waiting for it to be ready.
func restartWipedSlow(t *testing.T, c *Cluster, px *throttledProxy) {
	t.Helper()
	stopWiped(t, c)
	px.slow.Store(true)
	for _, n := range c.Nodes {
		n.StartNoWait()
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

// TestArrivalCorruptBlock: a block of the checkpoint being fetched that
// does not match the manifest's CRC of it fails its read (EIO), never
// serving a wrong byte; the fetch fails too, the checkpoint is no longer
// shown, and the job restores the older one, intact.
func TestArrivalCorruptBlock(t *testing.T) {
	srv := s3test.Start(t)
	requireFUSE(t)
	px := startThrottledProxy(t, srv.Addr, 4<<20)
	c := s3Cluster(t, srv, 2, "bad", "AWS_ENDPOINT_URL_S3=http://"+px.addr()).Start()
	writeRandom(t, c.Nodes[1].Path("ckpt.1", "state.bin"), 100_000, 1)
	completeOn(t, c, "ckpt.1")
	sums1 := clusterSums(t, c, "ckpt.1")
	// Two ranges of the object store's fetch, five blocks.
	writeRandom(t, c.Nodes[1].Path("ckpt.2", "rank_1.bin"), 5*prefix.BlockSize-100, 2)
	completeOn(t, c, "ckpt.2")
	for _, ds := range []string{"ckpt.1", "ckpt.2"} {
		if out, errs, code := c.Nodes[0].CLI("flush", "--wait", ds); code != 0 {
			t.Fatalf("flush %s: exit %d: %s%s", ds, code, out, errs)
		}
	}
	// A byte of block 2 flipped by someone who can write the bucket, the
	// object stored without a checksum of its own: only the manifest's
	// block CRC can tell.
	cl, ctx := srv.Client(), context.Background()
	key := aws.String("bad/ckpt.2/rank_1.bin")
	obj, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s3test.Bucket), Key: key})
	must(t, err)
	b, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	must(t, err)
	b[2*prefix.BlockSize+5] ^= 0x40
	_, err = cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s3test.Bucket), Key: key, Body: bytes.NewReader(b)})
	must(t, err)

	restartWipedSlow(t, c, px)
	n1 := c.Nodes[1]
	testutil.Eventually(t, 30*time.Second, "node 1's mount appears", func() bool { return mounted(n1.Mount) })
	got := make([]byte, 4096)
	f, err := os.Open(n1.Path("ckpt.2", "rank_1.bin"))
	if err == nil {
		_, err = f.ReadAt(got, 2*prefix.BlockSize)
		f.Close()
		if err == nil {
			t.Fatal("a read of the corrupt block succeeded")
		}
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("a read of the corrupt block: %v, want EIO", err)
		}
		t.Logf("the read of the corrupt block failed: %v", err)
	} else if !os.IsNotExist(err) {
		t.Fatalf("open of the corrupt checkpoint's file: %v", err)
	} else {
		t.Logf("the fetch failed before the read: %v", err)
	}
	c.WaitAll(60*time.Second, "scrfs ready")
	c.Nodes[0].WaitLog(time.Second, "fetch failed, recorded in the index", "dataset=ckpt.2")
	c.WaitCompleted(time.Second, "ckpt.1")
	for i, n := range c.Nodes {
		sameSums(t, fmt.Sprintf("ckpt.1 on node %d", i), withoutMeta(treeSums(t, n.CacheDir("ckpt.1"))), sums1[i])
		if _, err := os.Stat(n.Path("ckpt.2")); !os.IsNotExist(err) {
			t.Fatalf("node %d shows the failed ckpt.2: %v", i, err)
		}
	}
}
