package crc32c

import "io"

// readBlock is how much ReadAt reads at a time before it takes the CRC32C
// of those bytes: well inside a core's L2 cache.
const readBlock = 256 << 10

// ReadAt fills p from r at off and returns its CRC32C, reading and
// checksumming a block at a time, so the CRC runs over bytes still in the
// core's cache rather than fetching the whole of p back from memory.
func ReadAt(r io.ReaderAt, p []byte, off int64) (uint32, error) {
	var crc uint32
	for at := 0; at < len(p); at += readBlock {
		b := p[at:min(at+readBlock, len(p))]
		if _, err := r.ReadAt(b, off+int64(at)); err != nil {
			return 0, err
		}
		crc = Update(crc, b)
	}
	return crc, nil
}
