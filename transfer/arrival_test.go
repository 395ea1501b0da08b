package transfer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/prefix"
)

// arrivalPrefix flushes a dataset of two nodes to a prefix: node 0 a file
// of three blocks, node 1 a small file; it returns the prefix, the
// manifest and the files' bytes.
func arrivalPrefix(t *testing.T) (*prefix.Prefix, *prefix.Manifest, map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	p, err := prefix.Open(ctx, prefix.Config{Location: filepath.Join(dir, "prefix"), Key: []byte("arrival-test-key-0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	data := map[string][]byte{
		"rank_0.bin":     randomBytes(3*prefix.BlockSize-100, 1),
		"meta/.metadata": randomBytes(5000, 2),
	}
	if err := p.BeginFlush(ctx, prefix.IndexEntry{Name: "ckpt.1", ID: 1, Nodes: 2}, nil); err != nil {
		t.Fatal(err)
	}
	for node, path := range []string{"rank_0.bin", "meta/.metadata"} {
		src := filepath.Join(dir, "node", string(rune('0'+node)))
		writeAll(t, filepath.Join(src, path), data[path])
		list, err := files.Scan(src)
		if err != nil {
			t.Fatal(err)
		}
		es, err := p.Flush(ctx, "ckpt.1", src, node, list, prefix.Options{CRC: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WritePart(ctx, "ckpt.1", node, es); err != nil {
			t.Fatal(err)
		}
	}
	man, err := p.CompleteFlush(ctx, "ckpt.1", 2, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, man, data
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func writeAll(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestArrivalReadsAhead: a dataset being fetched is listed whole (every
// node's entries), and its files read right block by block before the
// fetch brought them: this node's from the prefix into their staged
// copies, another node's into scratch files; blocks the fetch reports
// landed are not read again; a block that does not check out fails its
// read and no other; releasing the arrival and the opens closes every
// descriptor.
func TestArrivalReadsAhead(t *testing.T) {
	p, man, data := arrivalPrefix(t)
	f := &Flusher{prefix: p, log: slog.New(slog.DiscardHandler), met: newFlushMetrics(nil)}
	f.blockBufs.New = func() any { b := make([]byte, prefix.BlockSize); return &b }
	staging := filepath.Join(t.TempDir(), "staging", "ckpt.1")
	if err := os.MkdirAll(staging, 0o700); err != nil {
		t.Fatal(err)
	}
	fdsBefore := openFds(t)
	a, err := f.newArrival(fetchMsg{Dataset: "ckpt.1", Seq: 1}, man, man.ForNodes([]int{0}), staging)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".", "rank_0.bin", "meta", "meta/.metadata"} {
		if _, ok := a.View.Lookup(p); !ok {
			t.Errorf("the arrival's view lacks %s", p)
		}
	}
	if st, err := os.Stat(filepath.Join(staging, "rank_0.bin")); err != nil || st.Size() != int64(len(data["rank_0.bin"])) {
		t.Fatalf("staged copy: %v, %v", st, err)
	}

	ctx := context.Background()
	read := func(h *ArrivingFile, off int64, n int) ([]byte, error) {
		k, err := h.Await(ctx, off, n)
		if err != nil {
			return nil, err
		}
		b := make([]byte, k)
		_, err = unix.Pread(h.fd, b, off)
		return b, err
	}
	big, _ := a.View.Lookup("rank_0.bin")
	h, err := a.Open(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	// The tail first.
	want := data["rank_0.bin"]
	tail := int64(len(want)) - 4096
	if got, err := read(h, tail, 8192); err != nil || !bytes.Equal(got, want[tail:]) {
		t.Fatalf("read of the tail: %v, bytes equal %v", err, bytes.Equal(got, want[tail:]))
	}
	if h.Whole() {
		t.Fatal("whole with two blocks never read")
	}
	// A block the fetch reports landed is not read again: the fetch wrote
	// it (here nothing did, so it reads as the hole it is).
	a.landed("rank_0.bin", 0)
	if got, err := read(h, 10, 10); err != nil || !bytes.Equal(got, make([]byte, 10)) {
		t.Fatalf("read of a block reported landed: %v %x", err, got)
	}
	if got, err := read(h, prefix.BlockSize, 20); err != nil || !bytes.Equal(got, want[prefix.BlockSize:prefix.BlockSize+20]) {
		t.Fatalf("read of block 1: %v", err)
	}
	if !h.Whole() {
		t.Fatal("not whole with every block read or landed")
	}
	small, _ := a.View.Lookup("meta/.metadata")
	hs, err := a.Open(ctx, small)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := read(hs, 0, 1<<20); err != nil || !bytes.Equal(got, data["meta/.metadata"]) {
		t.Fatalf("another node's file: %v", err)
	}

	// A flipped byte in the prefix: only its block fails.
	testutil.FlipByte(t, filepath.Join(p.String(), "ckpt.1", "rank_0.bin"), prefix.BlockSize+7)
	a2, err := f.newArrival(fetchMsg{Dataset: "ckpt.1", Seq: 1}, man, nil, staging+"2")
	if err != nil {
		t.Fatal(err)
	}
	h2, err := a2.Open(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	var ce *prefix.CorruptError
	if _, err := read(h2, prefix.BlockSize, 10); !errors.As(err, &ce) {
		t.Fatalf("read of the corrupt block: %v, want a *prefix.CorruptError", err)
	}
	if _, err := read(h2, 0, 10); err != nil {
		t.Fatalf("read of the block before it: %v", err)
	}

	for _, h := range []*ArrivingFile{h, hs, h2} {
		h.Close()
	}
	a.release()
	a2.release()
	if n := openFds(t); n != fdsBefore {
		t.Fatalf("%d descriptors open, %d before", n, fdsBefore)
	}
}

func openFds(t *testing.T) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(des)
}
