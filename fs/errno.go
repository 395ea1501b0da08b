package fs

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/scrfs/scrfs/cache"
)

// errnoOf maps the os package's sentinels; the store's map as
// cache.Errno says.
var errnoOf = []struct {
	err   error
	errno syscall.Errno
}{
	// The application's call was interrupted while the mount asked the
	// job (or the daemon is stopping): it may retry.
	{context.Canceled, syscall.EINTR},
	{os.ErrNotExist, syscall.ENOENT},
	{os.ErrExist, syscall.EEXIST},
	{os.ErrPermission, syscall.EACCES},
}

// toErrno is the one place where Go errors become errno values. Errors that
// carry an errno (os.PathError and friends, wrapped or not) keep it; the
// store's sentinels map as cache.Errno says, the os package's as listed above; anything else is logged once and
// becomes EIO.
func (f *FS) toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	if errno, ok := cache.Errno(err); ok {
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
