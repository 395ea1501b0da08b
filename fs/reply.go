package fs

import (
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hanwen/go-fuse/v2/splice"
)

// A read's reply is spliced from the cache file to the kernel when a pipe
// can carry it (fuse.ReadResultFd), so its bytes never pass through the
// daemon's memory. go-fuse grows its pipe to the reply's header, the bytes
// and a page, and Linux caps a pipe at /proc/sys/fs/pipe-max-size (1 MiB
// by default): less than a 1 MiB read needs, the largest the kernel sends
// under a 1 MiB max_read. go-fuse then reads the bytes into the request's
// buffer instead, after a failed attempt and with a warning for every
// read. readReply does that at once for a reply too large to splice, and
// hands the bytes over as a vector, which go-fuse writes to the kernel
// as it is (a plain byte reply would go through the failing splice too):
// the same copy, without the attempt or the warning.

// fuseOutHeader is the size of a FUSE reply's header (struct
// fuse_out_header), which shares the pipe with the bytes.
const fuseOutHeader = 16

// spliceMax is the largest read reply go-fuse can splice, 0 when it
// cannot resize its pipes.
var spliceMax = func() int {
	if !splice.Resizable() {
		return 0
	}
	return splice.MaxPipeSize() - fuseOutHeader - os.Getpagesize()
}()

// readReply answers a read of n bytes at off of the open file fd, with
// dest the request's buffer (at least n bytes).
func (f *FS) readReply(fd int, dest []byte, off int64, n int) (fuse.ReadResult, syscall.Errno) {
	if n <= spliceMax {
		return fuse.ReadResultFd(uintptr(fd), off, n), 0
	}
	got := 0
	for got < n {
		k, err := syscall.Pread(fd, dest[got:n], off+int64(got))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, f.toErrno(err)
		}
		if k == 0 {
			break // the file shrank: what is there, as a spliced read gives
		}
		got += k
	}
	return fuse.ReadResultVector([][]byte{dest[:got]}), 0
}
