package namespace_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/jobnet/memnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/node"
	"github.com/scrfs/scrfs/node/nodetest"
	"github.com/scrfs/scrfs/schemes"
)

// bigSize spans many fetch blocks, ends inside one, and is larger than the
// 64 MiB bigJob's nodes fetch whole at open; smallSize is not.
const (
	bigSize   = 67<<20 + 4567
	smallSize = 5<<20 + 99
)

// bigJob is four XOR nodes where node 1 wrote big.bin (bigSize bytes) and
// small.bin (smallSize); it
// returns the bytes, every node's metrics, and the count of read requests
// each node sent.
func bigJob(t *testing.T) (*nodetest.Job, []byte, []*prometheus.Registry, []*atomic.Int64) {
	regs := make([]*prometheus.Registry, 4)
	calls := make([]*atomic.Int64, 4)
	for i := range regs {
		calls[i] = new(atomic.Int64)
	}
	j := nodetest.New(t, 4, memnet.Faults{
		Call: func(from, to int, kind string) memnet.Drop {
			if kind == "namespace.read" {
				calls[from].Add(1)
			}
			return memnet.Deliver
		},
	}, nodetest.Config{
		Scheme: layout.Scheme{Kind: layout.KindXOR}, SetSize: 4,
		// No node of it goes down: the bounds are for a machine as busy as
		// it gets, not a guess at how fast a healthy holder serves.
		Options: node.Options{Timeout: 10 * time.Second, ConnectTimeout: 10 * time.Second, MemberTimeout: 30 * time.Second,
			FetchWhole: 64 << 20},
		PerNode: func(i int, o *node.Options) {
			regs[i] = prometheus.NewRegistry()
			o.Registerer = regs[i]
		},
	})
	j.RestartAll()
	big := bytes(5, bigSize)
	for _, n := range j.Nodes {
		files := map[string][]byte{fmt.Sprintf("rank.%d", n.Index): {byte(n.Index)}}
		if n.Index == 1 {
			files["big.bin"], files["small.bin"] = big, big[:smallSize]
		}
		n.Write("ckpt_1", files)
	}
	if err := j.Nodes[0].Protocols.Complete.Complete(context.Background(), "ckpt_1"); err != nil {
		t.Fatal(err)
	}
	j.WaitState(wait, "ckpt_1", cache.Protected, j.All()...)
	return j, big, regs, calls
}

func received(t *testing.T, reg *prometheus.Registry) int64 {
	return int64(testutil.Counter(t, reg, "scrfs_namespace_received_bytes_total", nil))
}

// TestSmallFileFetchedAtOpen: a file of at most 64 MiB comes whole, in
// one request, before the open returns; a large file read front to back
// arrives in a few large requests, each byte once, and its copy then
// serves later opens from the read cache.
func TestSmallFileFetchedAtOpen(t *testing.T) {
	j, big, regs, calls := bigJob(t)
	_, r, err := open(t, j, 3, "ckpt_1", "small.bin")
	if err != nil || r == nil || !r.Whole() {
		t.Fatalf("open of a small file: %v %v, want its whole copy", r, err)
	}
	r.Close()
	if n, got := calls[3].Load(), received(t, regs[3]); n != 1 || got != smallSize {
		t.Errorf("a %d-byte file cost %d requests and %d bytes, want 1 and its size", smallSize, n, got)
	}
	calls[3].Store(0)
	got, err := readChunks(t, j, 3, "ckpt_1", "big.bin", 128<<10)
	if err != nil || sum(got) != sum(big) {
		t.Fatalf("read: %d bytes, %v", len(got), err)
	}
	blocks := int64(bigSize>>20 + 1)
	t.Logf("%d blocks read in order: %d requests, %d bytes received", blocks, calls[3].Load(), received(t, regs[3])-smallSize)
	if n := calls[3].Load(); n < 2 || n > blocks/4 {
		t.Errorf("node 3 sent %d read requests for %d blocks read in order, want a few", n, blocks)
	}
	if n := received(t, regs[3]) - smallSize; n != bigSize {
		t.Errorf("node 3 received %d bytes, want the file's %d once", n, bigSize)
	}
	for _, p := range []string{"small.bin", "big.bin"} {
		local, r, err := open(t, j, 3, "ckpt_1", p)
		if err != nil || r != nil || local == "" {
			t.Fatalf("open of %s after a whole read: %q %v %v, want the read cache's copy", p, local, r, err)
		}
	}
}

// TestReadInOrderFetchesAhead: reads in order from inside a file fetch a
// growing window ahead of them, in a few requests, each byte once.
func TestReadInOrderFetchesAhead(t *testing.T) {
	j, big, regs, calls := bigJob(t)
	_, r, err := open(t, j, 3, "ckpt_1", "big.bin")
	if err != nil || r == nil {
		t.Fatalf("open: %v %v, want a copy being fetched", r, err)
	}
	defer r.Close()
	buf := make([]byte, 128<<10)
	for o := int64(1 << 20); o < bigSize; o += int64(len(buf)) {
		k, err := r.Await(context.Background(), o, len(buf))
		if err != nil {
			t.Fatalf("await %d: %v", o, err)
		}
		if _, err := syscall.Pread(int(r.Fd()), buf[:k], o); err != nil || sum(buf[:k]) != sum(big[o:o+int64(k)]) {
			t.Fatalf("bytes at %d differ (%v)", o, err)
		}
	}
	blocks := int64(bigSize>>20 + 1)
	t.Logf("%d blocks read in order: %d requests, %d bytes received", blocks-1, calls[3].Load(), received(t, regs[3]))
	if n := calls[3].Load(); n < 2 || n > blocks/3 {
		t.Errorf("node 3 sent %d read requests for %d blocks read in order, want a few", n, blocks-1)
	}
	if n := received(t, regs[3]); n != bigSize-1<<20 {
		t.Errorf("node 3 received %d bytes, want the %d read once", n, bigSize-1<<20)
	}
}

// TestReadRangeFetchesItsBlocks: a reader of part of a file (a resharded
// load reads slices of every shard) moves those blocks and a bounded
// readahead, not the file; a copy left incomplete is removed at the last
// close.
func TestReadRangeFetchesItsBlocks(t *testing.T) {
	j, big, regs, _ := bigJob(t)
	_, r, err := open(t, j, 3, "ckpt_1", "big.bin")
	if err != nil || r == nil {
		t.Fatalf("open: %v %v, want a copy being fetched", r, err)
	}
	const off, n = 8 << 20, 2 << 20
	buf := make([]byte, 128<<10)
	for o := int64(off); o < off+n; o += int64(len(buf)) {
		k, err := r.Await(context.Background(), o, len(buf))
		if err != nil || k != len(buf) {
			t.Fatalf("await %d: %d, %v", o, k, err)
		}
		if _, err := syscall.Pread(int(r.Fd()), buf, o); err != nil {
			t.Fatal(err)
		}
		if sum(buf) != sum(big[o:o+int64(len(buf))]) {
			t.Fatalf("bytes at %d differ", o)
		}
	}
	t.Logf("%d bytes read at %d: %d bytes received", n, off, received(t, regs[3]))
	if got := received(t, regs[3]); got < n || got > n+8<<20 {
		t.Errorf("reading %d bytes at %d moved %d bytes, want those and a bounded readahead", n, off, got)
	}
	r.Close()
	if v := testutil.Counter(t, regs[3], "scrfs_namespace_read_cache_bytes", nil); v != 0 {
		t.Errorf("read cache holds %v bytes after the last close of an incomplete copy, want 0", v)
	}
	left, _ := filepath.Glob(filepath.Join(j.Nodes[3].CacheDir, layout.MetaDir, "readcache", "ckpt_1", "*", ".*part*"))
	if len(left) != 0 {
		t.Errorf("incomplete copies left behind: %v", left)
	}
}

// TestAnyRangeOfACorruptFileFails: the holder checks the whole file before
// it serves any range of it, so a reader of the first block of a file
// damaged at its end gets an error, never the (intact-looking) bytes.
func TestAnyRangeOfACorruptFileFails(t *testing.T) {
	j, _, _, _ := bigJob(t)
	p := filepath.Join(j.Nodes[1].Store.Get("ckpt_1").Dir(), "big.bin")
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xee}, bigSize-1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, r, err := open(t, j, 3, "ckpt_1", "big.bin")
	if err != nil || r == nil {
		t.Fatalf("open: %v %v", r, err)
	}
	defer r.Close()
	if _, err := r.Await(context.Background(), 0, 4096); !errors.Is(err, schemes.ErrCorrupt) {
		t.Fatalf("read of the first block of a corrupted file: %v, want ErrCorrupt", err)
	}
}

// TestConcurrentReadersShareBlocks: readers of one file at once, each from
// the start, move each block once.
func TestConcurrentReadersShareBlocks(t *testing.T) {
	j, big, regs, _ := bigJob(t)
	var wg sync.WaitGroup
	for k := range 4 {
		wg.Go(func() {
			got, err := readChunks(t, j, 2, "ckpt_1", "big.bin", (k+1)*96<<10)
			if err != nil || sum(got) != sum(big) {
				t.Errorf("reader %d: %d bytes, %v", k, len(got), err)
			}
		})
	}
	wg.Wait()
	if n := received(t, regs[2]); n != bigSize {
		t.Errorf("node 2 received %d bytes for 4 readers, want the file's %d once", n, bigSize)
	}
}
