package main

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/scrfs/scrfs/bench/internal/netbound"
)

// ioSize is the unit of every write and read the benchmark makes: through
// the mounts, over loopback TCP (the bounds) and through the encoders.
const ioSize = netbound.IOSize

// payload makes the checkpoint bytes: node q's file of a given size is the
// same in every round and every scheme, so its sha256 is computed once,
// while it is first written, and checks every later read.
type payload struct {
	wbufs [][]byte // per node: ioSize, pseudo-random, stamped per block
	rbufs [][]byte // per node: ioSize, for reading back

	mu   sync.Mutex
	sums map[sumKey][sha256.Size]byte
}

type sumKey struct {
	node int
	size int64
}

// newPayload allocates and fills the buffers of n nodes; different nodes
// get different bytes, so parity is never trivially zero.
func newPayload(n int) *payload {
	p := &payload{sums: map[sumKey][sha256.Size]byte{}}
	for q := range n {
		w := make([]byte, ioSize)
		rand.NewChaCha8([32]byte{byte(q), 'r', 'e', 'd'}).Read(w)
		p.wbufs = append(p.wbufs, w)
		r := make([]byte, ioSize)
		clear(r)
		p.rbufs = append(p.rbufs, r)
	}
	return p
}

// stamp writes the node and block number into the block's first 16 bytes,
// so no two blocks of a checkpoint are equal: a rebuild that put a block in
// the wrong place would change the file's sum.
func stamp(buf []byte, node int, blk int64) {
	binary.LittleEndian.PutUint64(buf[0:8], uint64(blk))
	binary.LittleEndian.PutUint64(buf[8:16], uint64(node)^0x5eed)
}

// fileName is node q's checkpoint file inside a dataset.
func fileName(q int) string { return fmt.Sprintf("rank_%d.bin", q) }

// write writes node q's file of size bytes to path, ioSize at a time, as an
// application would; the first time for (q, size) it also records the sum.
func (p *payload) write(path string, q int, size int64) error {
	p.mu.Lock()
	_, known := p.sums[sumKey{q, size}]
	p.mu.Unlock()
	var h hash.Hash
	if !known {
		h = sha256.New()
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := p.wbufs[q]
	for blk, off := int64(0), int64(0); off < size; blk, off = blk+1, off+ioSize {
		n := min(ioSize, size-off)
		stamp(buf, q, blk)
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return fmt.Errorf("write %s at %d: %w", path, off, err)
		}
		if h != nil {
			h.Write(buf[:n])
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if h != nil {
		var sum [sha256.Size]byte
		h.Sum(sum[:0])
		p.mu.Lock()
		p.sums[sumKey{q, size}] = sum
		p.mu.Unlock()
	}
	return nil
}

// writeAll writes every node's file of dataset ds concurrently, each
// through its own mount.
func (p *payload) writeAll(mounts []string, ds string, size int64) error {
	errs := make([]error, len(mounts))
	var wg sync.WaitGroup
	for q, mnt := range mounts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A dataset directory made on one node appears on every
			// node, so every node makes it as ranks do: if missing.
			dir := filepath.Join(mnt, ds)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				errs[q] = err
				return
			}
			errs[q] = p.write(filepath.Join(dir, fileName(q)), q, size)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// errMismatch says a file read back is not what was written.
var errMismatch = errors.New("sha256 differs from what was written")

// verify reads node q's file at path and compares its size and sha256 with
// what was written.
func (p *payload) verify(path string, q int, size int64) error {
	p.mu.Lock()
	want, ok := p.sums[sumKey{q, size}]
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("verify %s: no sum recorded for node %d, size %d", path, q, size)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, onlyReader{f}, p.rbufs[q])
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if n != size {
		return fmt.Errorf("%s: %d bytes, want %d: %w", path, n, size, errMismatch)
	}
	if got := h.Sum(nil); string(got) != string(want[:]) {
		return fmt.Errorf("%s: sha256 %x, want %x: %w", path, got, want, errMismatch)
	}
	return nil
}

// onlyReader hides *os.File's WriteTo, so io.CopyBuffer uses the given
// (reused, ioSize) buffer and reads ioSize at a time.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(b []byte) (int, error) { return o.r.Read(b) }
