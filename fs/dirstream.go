package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/layout"
)

// datasetRootStream lists a dataset's root directory as the application
// sees it: the cache directory's entries, "." and ".." included, without
// scrfs's metadata directory, and with ".." naming the mount directory the
// dataset sits in. Offsets are the cache directory's own, so seeking works
// as on the cache file system.
type datasetRootStream struct {
	gofs.DirStream
	parentIno uint64

	next  *fuse.DirEntry // read ahead by HasNext, not yet returned
	errno syscall.Errno  // the error that came with next
}

// HasNext reads ahead past the hidden entry.
func (s *datasetRootStream) HasNext() bool {
	for s.next == nil {
		if !s.DirStream.HasNext() {
			return false
		}
		e, errno := s.DirStream.Next()
		if errno == 0 && e.Name == layout.MetaDir {
			continue
		}
		if e.Name == ".." {
			e.Ino = s.parentIno
		}
		s.next, s.errno = &e, errno
	}
	return true
}

// Next returns the entry HasNext found.
func (s *datasetRootStream) Next() (fuse.DirEntry, syscall.Errno) {
	if !s.HasNext() {
		return fuse.DirEntry{}, syscall.ENOENT
	}
	e, errno := *s.next, s.errno
	s.next, s.errno = nil, 0
	return e, errno
}

// Seekdir drops what was read ahead and seeks the cache directory.
func (s *datasetRootStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	s.next, s.errno = nil, 0
	if sd, ok := s.DirStream.(gofs.FileSeekdirer); ok {
		return sd.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}
