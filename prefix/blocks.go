package prefix

import (
	"context"
	"errors"
	"fmt"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
)

// A large file's manifest entry carries the CRC32C of every BlockSize
// block besides the whole file's (Entry.Blocks), so that a restart can
// serve a block it read from the prefix the moment that block is
// verified, long before the whole file is: the mount shows a fetched
// checkpoint at once and fetches what the application reads first
// (ReadBlock). Both backends copy files in ranges that start at block
// boundaries, so every block is summed by one stream, in order.

// BlockSize is the span of each CRC32C in Entry.Blocks: block b holds the
// file's bytes [b·BlockSize, (b+1)·BlockSize), the last one fewer.
const BlockSize = 4 << 20

// BlockCount is the number of blocks of a file of size bytes.
func BlockCount(size int64) int { return int((size + BlockSize - 1) / BlockSize) }

// BlockChecked says whether each block of regular file e can be checked
// on its own as it is read: against its block CRC, or for a file of one
// block its file CRC (or there is no CRC to check). A file of several
// blocks with only a file CRC is checked only whole.
func (e *Entry) BlockChecked() bool {
	return !e.HasCRC || len(e.Blocks) > 0 || BlockCount(e.Size) <= 1
}

// perBlock says whether a fetch with o checks e block by block as it
// copies it (and reports each block landed then), rather than whole at
// its end.
func (o *Options) perBlock(e *Entry) bool { return o.CRC && len(e.Blocks) > 0 }

// skips says whether a fetch passes over block b of e (Skip): in place
// already, checked against its own CRC, which then stands for its bytes.
func (o *Options) skips(e *Entry, b int) bool {
	return o.Skip != nil && o.perBlock(e) && o.Skip(e.Path, b)
}

// eachRun walks [off, off+n) of a file of size bytes: each block skips
// passes over goes to skipped, and each run of blocks between them to
// fetch, so the source is asked once per run rather than per block.
func eachRun(size, off, n int64, skips func(b int) bool, skipped func(b int, n int64), fetch func(from, to int64) error) error {
	for pos, end := off, off+n; pos < end; {
		if b := int(pos / BlockSize); skips(b) {
			_, bn := blockSpan(size, b)
			skipped(b, bn)
			pos += bn
			continue
		}
		run := pos
		for run < end && (run == pos || !skips(int(run/BlockSize))) {
			_, bn := blockSpan(size, int(run/BlockSize))
			run += bn
		}
		if err := fetch(pos, run); err != nil {
			return err
		}
		pos = run
	}
	return nil
}

// blockSpan returns the offset and length of block b of a file of size
// bytes.
func blockSpan(size int64, b int) (off, n int64) {
	off = int64(b) * BlockSize
	return off, min(BlockSize, size-off)
}

// blockSums are the CRC32Cs of one file's blocks, filled in as streams
// copy its ranges. done, if set, hears each block as its sum is known,
// from the stream that summed it; an error it returns fails the copy.
type blockSums struct {
	size int64
	sums []uint32
	done func(b int, crc uint32) error
}

func newBlockSums(size int64, done func(b int, crc uint32) error) *blockSums {
	return &blockSums{size: size, sums: make([]uint32, BlockCount(size)), done: done}
}

// from starts summing the range at off, a block boundary.
func (s *blockSums) from(off int64) *summer { return &summer{s: s, pos: off} }

// combined returns the CRC32C of the blocks [from, to) as one run.
func (s *blockSums) combined(from, to int) uint32 {
	var crc uint32
	for b := from; b < to; b++ {
		_, n := blockSpan(s.size, b)
		crc = crc32c.Combine(crc, s.sums[b], n)
	}
	return crc
}

// summer sums one range of a file, block by block, as its bytes pass.
type summer struct {
	s   *blockSums
	pos int64  // the next byte
	crc uint32 // of the current block's bytes so far
}

// add sums p, the bytes at the summer's position.
func (m *summer) add(p []byte) error {
	for len(p) > 0 {
		k := min(int64(len(p)), m.blockEnd()-m.pos)
		m.crc = crc32c.Update(m.crc, p[:k])
		p = p[k:]
		if err := m.advance(k); err != nil {
			return err
		}
	}
	return nil
}

// zeros sums n zero bytes (a hole of the source).
func (m *summer) zeros(n int64) error {
	for n > 0 {
		k := min(n, m.blockEnd()-m.pos)
		m.crc = crc32c.Zeros(m.crc, k)
		n -= k
		if err := m.advance(k); err != nil {
			return err
		}
	}
	return nil
}

// skip passes over a whole block of n bytes, at the summer's position,
// whose CRC32C is crc.
func (m *summer) skip(crc uint32, n int64) {
	m.s.sums[int(m.pos/BlockSize)] = crc
	m.pos += n
}

func (m *summer) blockEnd() int64 {
	off, n := blockSpan(m.s.size, int(m.pos/BlockSize))
	return off + n
}

// advance moves past k summed bytes, closing the block they end.
func (m *summer) advance(k int64) error {
	end := m.blockEnd()
	m.pos += k
	if m.pos < end {
		return nil
	}
	b := int((end - 1) / BlockSize)
	m.s.sums[b], m.crc = m.crc, 0
	if m.s.done != nil {
		return m.s.done(b, m.s.sums[b])
	}
	return nil
}

// rangeCRC returns the CRC32C of the range summed so far, [start, pos),
// which ends at a block boundary or the end of the file.
func (m *summer) rangeCRC(start int64) uint32 {
	return m.s.combined(int(start/BlockSize), BlockCount(m.pos))
}

// checkBlocks checks an entry's block sums against its size and its whole
// CRC32C: a manifest whose blocks disagree with their file is corrupt.
func (e *Entry) checkBlocks() error {
	if e.Blocks == nil {
		return nil
	}
	if e.Type != files.Regular || !e.HasCRC {
		return fmt.Errorf("%s: block CRCs without a file CRC", e.Path)
	}
	if len(e.Blocks) != BlockCount(e.Size) || len(e.Blocks) < 2 {
		return fmt.Errorf("%s: %d block CRCs for %d bytes (blocks of %d)", e.Path, len(e.Blocks), e.Size, BlockSize)
	}
	s := &blockSums{size: e.Size, sums: e.Blocks}
	if crc := s.combined(0, len(e.Blocks)); crc != e.CRC32C {
		return fmt.Errorf("%s: block CRCs combine to %08x, file CRC is %08x", e.Path, crc, e.CRC32C)
	}
	return nil
}

// checkBlock compares the CRC32C of block b of e's file, read from name,
// with the manifest's: the block's own, or for a file of one block the
// file's.
func (e *Entry) checkBlock(b int, crc uint32, name string) error {
	want, ok := e.CRC32C, e.HasCRC
	if len(e.Blocks) > 0 {
		want, ok = e.Blocks[b], true
	}
	if !ok || crc == want {
		return nil
	}
	off, n := blockSpan(e.Size, b)
	return &CorruptError{Path: name, Reason: fmt.Sprintf("bytes %d to %d: crc32c %08x, manifest says %08x", off, off+n, crc, want)}
}

// fetchedBlock returns what a fetch does as each block of e's file, read
// from name, is summed: check it against the manifest's block CRCs and
// report it landed (Options.Landed). nil for a file without block CRCs,
// which is checked, and lands, whole (landedAll).
func (o *Options) fetchedBlock(e *Entry, name string) func(int, uint32) error {
	if !o.perBlock(e) {
		return nil
	}
	return func(b int, crc uint32) error {
		if err := e.checkBlock(b, crc, name); err != nil {
			return err
		}
		if o.Landed != nil {
			o.Landed(e.Path, b)
		}
		return nil
	}
}

// landedAll reports every block of fetched file e landed, once the whole
// file is checked, unless they were reported one by one (blockDone).
func (o *Options) landedAll(e *Entry) {
	if o.Landed == nil || o.perBlock(e) {
		return
	}
	for b := range BlockCount(e.Size) {
		o.Landed(e.Path, b)
	}
}

// ReadBlock reads block b of regular file e (an entry of dataset's
// manifest) from the prefix into buf, which must hold BlockSize bytes,
// and checks it against the manifest: its block CRC, or for a file of
// one block the file's CRC. It returns the block's bytes, a prefix of
// buf. A file of several blocks without block CRCs (flushed before they
// were recorded, or without CRCs) cannot be checked block by block: its
// blocks come back unchecked only when the manifest has no CRC at all,
// else ReadBlock fails with ErrNoBlockCRCs. A block that does not match
// is a *CorruptError.
func (p *Prefix) ReadBlock(ctx context.Context, dataset string, e *Entry, b int, buf []byte) ([]byte, error) {
	if e.Type != files.Regular || b < 0 || b >= BlockCount(e.Size) {
		return nil, fmt.Errorf("read block %d of %s: no such block", b, e.Path)
	}
	if !e.BlockChecked() {
		return nil, ErrNoBlockCRCs
	}
	off, n := blockSpan(e.Size, b)
	buf = buf[:n]
	name, err := p.s.readAt(ctx, dataset, e, off, buf)
	if err == nil {
		err = e.checkBlock(b, crc32c.Checksum(buf), name)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", dataset, e.Path, err)
	}
	return buf, nil
}

// ErrNoBlockCRCs is ReadBlock's error for a file the manifest checks
// only as a whole.
var ErrNoBlockCRCs = errors.New("the manifest has no block CRCs for this file: it is checked only whole")
