package prefix

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/internal/s3test"
	"github.com/scrfs/scrfs/internal/testutil"
)

// A file of 3 blocks and a bit, with a hole across the boundary of its
// first two blocks, and a file of one block.
func blockTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(fastDir(t), "ckpt.7")
	big := filepath.Join(src, "big.bin")
	writeFile(t, big, 3*BlockSize+12345, 11)
	f, err := os.OpenFile(big, os.O_RDWR, 0)
	must(t, err)
	must(t, punchHole(f, BlockSize-4096, 3*4096))
	must(t, f.Close())
	writeFile(t, filepath.Join(src, "small.bin"), 1000, 12)
	return src
}

// wantBlocks checks that the flushed entries carry, for each file of
// several blocks, the CRC32C of each of its blocks, and none otherwise.
func wantBlocks(t *testing.T, src string, es []Entry) map[string]*Entry {
	t.Helper()
	byPath := map[string]*Entry{}
	for i := range es {
		e := &es[i]
		byPath[e.Path] = e
		if e.Type != files.Regular {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Path))
		must(t, err)
		if BlockCount(e.Size) < 2 {
			if e.Blocks != nil {
				t.Errorf("%s: %d bytes, yet blocks %v", e.Path, e.Size, e.Blocks)
			}
			continue
		}
		var want []uint32
		for off := 0; off < len(b); off += BlockSize {
			want = append(want, crc32c.Checksum(b[off:min(off+BlockSize, len(b))]))
		}
		if !slices.Equal(e.Blocks, want) {
			t.Errorf("%s: blocks %x, want %x", e.Path, e.Blocks, want)
		}
		if err := e.check(); err != nil {
			t.Errorf("%s: %v", e.Path, err)
		}
	}
	return byPath
}

// TestBlocks: a flush records every block's CRC32C, holes included; the
// manifest keeps them; ReadBlock serves each block checked, and a
// flipped byte fails only its own block, naming its bytes; a fetch
// reports every block landed, and fails at the flipped one.
func TestBlocks(t *testing.T) {
	ctx := context.Background()
	src := blockTree(t)
	prefixDir := fastDir(t)
	p := dirPrefix(prefixDir)
	defer p.Close()
	es, err := p.Flush(ctx, "ckpt.7", src, 0, listed(t, src), Options{CRC: true, Streams: 2})
	must(t, err)
	byPath := wantBlocks(t, src, es)

	b, err := jsonOf(es)
	must(t, err)
	if !strings.Contains(b, `"blocks":[`) {
		t.Fatalf("manifest entries without blocks: %s", b)
	}

	big, small := byPath["big.bin"], byPath["small.bin"]
	want, err := os.ReadFile(filepath.Join(src, "big.bin"))
	must(t, err)
	buf := make([]byte, BlockSize)
	for blk := range BlockCount(big.Size) {
		got, err := p.ReadBlock(ctx, "ckpt.7", big, blk, buf)
		must(t, err)
		off, n := blockSpan(big.Size, blk)
		if !slices.Equal(got, want[off:off+n]) {
			t.Fatalf("block %d differs", blk)
		}
	}
	if _, err := p.ReadBlock(ctx, "ckpt.7", small, 0, buf); err != nil {
		t.Fatalf("one-block file: %v", err)
	}

	// Landed hears every block of every file once.
	var mu sync.Mutex
	landed := map[string][]int{}
	o := Options{CRC: true, Streams: 3, Landed: func(path string, b int) {
		mu.Lock()
		landed[path] = append(landed[path], b)
		mu.Unlock()
	}}
	must(t, p.Fetch(ctx, "ckpt.7", filepath.Join(fastDir(t), "ckpt.7"), es, o))
	for path, e := range byPath {
		if e.Type != files.Regular {
			continue
		}
		got := landed[path]
		slices.Sort(got)
		if len(got) != BlockCount(e.Size) || (len(got) > 0 && got[len(got)-1] != len(got)-1) {
			t.Errorf("%s: landed %v, %d blocks", path, got, BlockCount(e.Size))
		}
	}

	// Block 1 read ahead of the fetch into its destination: the fetch
	// passes over it and the file is whole.
	dst := filepath.Join(fastDir(t), "ckpt.7")
	must(t, os.MkdirAll(dst, 0o700))
	pre, err := os.Create(filepath.Join(dst, "big.bin"))
	must(t, err)
	_, err = pre.WriteAt(want[BlockSize:2*BlockSize], BlockSize)
	must(t, err)
	must(t, pre.Close())
	clear(landed)
	o.Skip = func(path string, b int) bool { return path == "big.bin" && b == 1 }
	must(t, p.Fetch(ctx, "ckpt.7", dst, es, o))
	if got, err := os.ReadFile(filepath.Join(dst, "big.bin")); err != nil || !slices.Equal(got, want) {
		t.Fatalf("fetched over a block read ahead: %v, equal %v", err, slices.Equal(got, want))
	}
	if slices.Contains(landed["big.bin"], 1) || len(landed["big.bin"]) != BlockCount(big.Size)-1 {
		t.Errorf("landed %v with block 1 skipped", landed["big.bin"])
	}
	o.Skip = nil

	// Flip a byte of block 2.
	victim := filepath.Join(prefixDir, "ckpt.7", "big.bin")
	testutil.FlipByte(t, victim, 2*BlockSize+7)
	_, err = p.ReadBlock(ctx, "ckpt.7", big, 2, buf)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Path != victim || !strings.Contains(ce.Reason, "bytes 8388608 to 12582912") {
		t.Fatalf("ReadBlock of the flipped block: %v", err)
	}
	for _, blk := range []int{0, 1, 3} {
		if _, err := p.ReadBlock(ctx, "ckpt.7", big, blk, buf); err != nil {
			t.Fatalf("block %d beside the flipped one: %v", blk, err)
		}
	}
	clear(landed)
	err = p.Fetch(ctx, "ckpt.7", filepath.Join(fastDir(t), "ckpt.7"), es, o)
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "bytes 8388608 to 12582912") {
		t.Fatalf("fetch with the flipped block: %v", err)
	}
	if slices.Contains(landed["big.bin"], 2) {
		t.Fatal("the flipped block was reported landed")
	}
}

// TestBlocksOldManifest: a manifest without block CRCs (written before
// they were) still fetches, every block landing once its file is
// checked whole, and ReadBlock refuses to serve its blocks unchecked.
func TestBlocksOldManifest(t *testing.T) {
	ctx := context.Background()
	src := blockTree(t)
	p := dirPrefix(fastDir(t))
	defer p.Close()
	es, err := p.Flush(ctx, "ckpt.7", src, 0, listed(t, src), Options{CRC: true})
	must(t, err)
	var big *Entry
	for i := range es {
		es[i].Blocks = nil
		if es[i].Path == "big.bin" {
			big = &es[i]
		}
	}
	if _, err := p.ReadBlock(ctx, "ckpt.7", big, 0, make([]byte, BlockSize)); !errors.Is(err, ErrNoBlockCRCs) {
		t.Fatalf("ReadBlock without block CRCs: %v", err)
	}
	n := 0
	var mu sync.Mutex // Landed is called from the copying streams
	o := Options{CRC: true, Landed: func(string, int) { mu.Lock(); n++; mu.Unlock() }}
	must(t, p.Fetch(ctx, "ckpt.7", filepath.Join(fastDir(t), "ckpt.7"), es, o))
	if n != BlockCount(big.Size)+1 {
		t.Fatalf("%d blocks landed, want %d", n, BlockCount(big.Size)+1)
	}
}

// TestBlocksChecked: a manifest's block CRCs must fit its file.
func TestBlocksChecked(t *testing.T) {
	src := blockTree(t)
	p := dirPrefix(fastDir(t))
	defer p.Close()
	es, err := p.Flush(context.Background(), "ckpt.7", src, 0, listed(t, src), Options{CRC: true})
	must(t, err)
	var big Entry
	for _, e := range es {
		if e.Path == "big.bin" {
			big = e
		}
	}
	for name, mutate := range map[string]func(e *Entry){
		"one too few":      func(e *Entry) { e.Blocks = e.Blocks[1:] },
		"a wrong one":      func(e *Entry) { e.Blocks = slices.Clone(e.Blocks); e.Blocks[1]++ },
		"without file CRC": func(e *Entry) { e.HasCRC = false },
	} {
		e := big
		mutate(&e)
		if err := checkEntries([]Entry{e}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestS3Blocks: the object store records and serves blocks as the
// directory does.
func TestS3Blocks(t *testing.T) {
	srv := s3test.Start(t)
	p := s3Prefix(t, srv, "run1")
	ctx := context.Background()
	src := blockTree(t)
	es, err := p.Flush(ctx, "ckpt.7", src, 0, listed(t, src), Options{CRC: true, Streams: 2})
	must(t, err)
	big := wantBlocks(t, src, es)["big.bin"]
	want, err := os.ReadFile(filepath.Join(src, "big.bin"))
	must(t, err)
	got, err := p.ReadBlock(ctx, "ckpt.7", big, 3, make([]byte, BlockSize))
	must(t, err)
	if !slices.Equal(got, want[3*BlockSize:]) {
		t.Fatal("last block differs")
	}
	n := 0
	var mu sync.Mutex
	o := Options{CRC: true, Streams: 2, Landed: func(string, int) { mu.Lock(); n++; mu.Unlock() }}
	must(t, p.Fetch(ctx, "ckpt.7", filepath.Join(fastDir(t), "ckpt.7"), es, o))
	if n != BlockCount(big.Size)+1 {
		t.Fatalf("%d blocks landed, want %d", n, BlockCount(big.Size)+1)
	}

	// Block 1 damaged in the store but read ahead, whole, into the
	// destination: the fetch passes over it (ranged GETs around it), so
	// the file is whole; without the read-ahead the damage is found.
	var stored []string
	must(t, filepath.WalkDir(srv.Dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "big.bin" && strings.Contains(path, "ckpt.7") {
			stored = append(stored, path)
		}
		return err
	}))
	if len(stored) != 1 {
		t.Fatalf("big.bin stored as %v", stored)
	}
	testutil.FlipByte(t, stored[0], BlockSize+99)
	dst := filepath.Join(fastDir(t), "ckpt.7")
	must(t, os.MkdirAll(dst, 0o700))
	must(t, os.WriteFile(filepath.Join(dst, "big.bin"), want[:2*BlockSize], 0o600))
	n = 0
	o.Skip = func(path string, b int) bool { return path == "big.bin" && b == 1 }
	must(t, p.Fetch(ctx, "ckpt.7", dst, es, o))
	if got, err := os.ReadFile(filepath.Join(dst, "big.bin")); err != nil || !slices.Equal(got, want) {
		t.Fatalf("fetched over a block read ahead: %v, equal %v", err, slices.Equal(got, want))
	}
	if n != BlockCount(big.Size) {
		t.Errorf("%d blocks landed with block 1 skipped, want %d", n, BlockCount(big.Size))
	}
	o.Skip = nil
	err = p.Fetch(ctx, "ckpt.7", filepath.Join(fastDir(t), "ckpt.7"), es, o)
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "bytes 4194304 to 8388608") {
		t.Fatalf("fetch of the damaged block: %v", err)
	}
}

// punchHole makes n bytes at off of f a hole, as a sparse checkpoint has.
func punchHole(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}
