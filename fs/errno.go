package fs

import (
	"errors"
	"os"
	"syscall"

	"github.com/scrfs/scrfs/cache"
)

// errnoOf maps the store's sentinel errors to what an application sees.
var errnoOf = []struct {
	err   error
	errno syscall.Errno
}{
	{cache.ErrNoDataset, syscall.EPERM},
	{cache.ErrReadOnly, syscall.EROFS},
	{cache.ErrNotFound, syscall.ENOENT},
	{cache.ErrExists, syscall.EEXIST},
	{cache.ErrNotEmpty, syscall.ENOTEMPTY},
	{cache.ErrClosed, syscall.EIO},
	{os.ErrNotExist, syscall.ENOENT},
	{os.ErrExist, syscall.EEXIST},
	{os.ErrPermission, syscall.EACCES},
}

// toErrno is the one place where Go errors become errno values. Errors that
// carry an errno (os.PathError and friends, wrapped or not) keep it; the
// store's sentinels map as listed above; anything else is logged once and
// becomes EIO.
func (f *FS) toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	for _, m := range errnoOf {
		if errors.Is(err, m.err) {
			return m.errno
		}
	}
	// Log each distinct text once, so a failing disk does not flood the log.
	if _, seen := f.unknownErrs.LoadOrStore(err.Error(), true); !seen {
		f.log.Error("unexpected error mapped to EIO", "err", err)
	}
	return syscall.EIO
}
