package netbound

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/scrfs/scrfs/internal/crc32c"
)

// source is where a ring member's checkpoint bytes come from: readAt
// fills b from offset off of the checkpoint and returns its CRC32C.
type source interface {
	readAt(b []byte, off int64) (uint32, error)
	close() error
}

// cacheSource reads a checkpoint in the cache written just before, as an
// encode reads one the application just wrote (redbench's (d)).
type cacheSource struct{ f *os.File }

// openCache writes the checkpoint at path afresh (untimed) and opens it.
func openCache(path string) (*cacheSource, error) {
	if err := rewrite(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &cacheSource{f}, nil
}

func (s *cacheSource) readAt(b []byte, off int64) (uint32, error) {
	crc, err := crc32c.ReadAt(s.f, b, off)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", s.f.Name(), err)
	}
	return crc, nil
}

func (s *cacheSource) close() error { return s.f.Close() }

// fetchSource fetches a checkpoint as a cold restart does: it reads the
// bytes from the prefix's copy on disk, takes their CRC32C (what a fetch
// checks against the manifest) and writes them into a staged copy in the
// cache, new each run. A ring member reading from it is an encode fed by
// the fetch as the bytes land: no byte is read back or checked twice
// (redbench's (f)).
type fetchSource struct {
	chunk int64
	// One descriptor per chunk of the logical file: a ring reads its p−1
	// chunks side by side, and the kernel's read-ahead follows one
	// stream per descriptor.
	srcs  []*os.File
	stage *os.File
}

// openFetch opens the prefix's copy src once per chunk (chunks of chunk
// bytes) and creates the staged copy at stage.
func openFetch(src, stage string, chunk int64, chunks int) (*fetchSource, error) {
	s := &fetchSource{chunk: chunk}
	for range chunks {
		f, err := os.Open(src)
		if err != nil {
			s.close()
			return nil, err
		}
		s.srcs = append(s.srcs, f)
	}
	f, err := os.Create(stage)
	if err != nil {
		s.close()
		return nil, err
	}
	s.stage = f
	return s, nil
}

func (s *fetchSource) readAt(b []byte, off int64) (uint32, error) {
	f := s.srcs[min(off/s.chunk, int64(len(s.srcs)-1))]
	crc, err := crc32c.ReadAt(f, b, off)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if _, err := s.stage.WriteAt(b, off); err != nil {
		return 0, fmt.Errorf("stage %s: %w", s.stage.Name(), err)
	}
	return crc, nil
}

func (s *fetchSource) close() error {
	var errs []error
	for _, f := range slices.Concat(s.srcs, []*os.File{s.stage}) {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// fetchAlone fetches the chunks of chunk bytes of src's checkpoint, each
// on a goroutine of its own into a buffer of bufs, a piece (the buffer's
// length) at a time: the streams (f) reads in, with nothing to feed
// (redbench's (f0)).
func fetchAlone(src *fetchSource, chunk int64, bufs [][]byte) error {
	jobs := make([]func([]byte) error, len(bufs))
	for k := range jobs {
		jobs[k] = func(buf []byte) error {
			piece := int64(len(buf))
			for off := int64(0); off < chunk; off += piece {
				if _, err := src.readAt(buf[:min(piece, chunk-off)], int64(k)*chunk+off); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return runAll(jobs, bufs)
}
