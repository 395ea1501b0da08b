package fs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/scrfs/scrfs/cache"
)

// TestToErrno is the table of what an application sees for each error the
// store and the cache file system return, bare and wrapped.
func TestToErrno(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("dataset ckpt.1: %w", err) }
	for _, c := range []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"nil", nil, 0},
		{"no dataset", cache.ErrNoDataset, syscall.EPERM},
		{"read-only", cache.ErrReadOnly, syscall.EROFS},
		{"read-only, wrapped", wrap(cache.ErrReadOnly), syscall.EROFS},
		{"not found", wrap(cache.ErrNotFound), syscall.ENOENT},
		{"exists", wrap(cache.ErrExists), syscall.EEXIST},
		{"not empty", wrap(cache.ErrNotEmpty), syscall.ENOTEMPTY},
		{"store closed", wrap(cache.ErrClosed), syscall.EIO},
		{"errno", syscall.ENOSPC, syscall.ENOSPC},
		{"errno, wrapped twice", wrap(wrap(syscall.EDQUOT)), syscall.EDQUOT},
		{"path error", &os.PathError{Op: "open", Path: "/x", Err: syscall.ENAMETOOLONG}, syscall.ENAMETOOLONG},
		{"path error, wrapped", wrap(&fs.PathError{Op: "mkdir", Path: "/x", Err: syscall.EEXIST}), syscall.EEXIST},
		{"syscall error", os.NewSyscallError("openat2", syscall.ELOOP), syscall.ELOOP},
		{"link error", &os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.EXDEV}, syscall.EXDEV},
		{"os.ErrNotExist", wrap(os.ErrNotExist), syscall.ENOENT},
		{"os.ErrExist", wrap(os.ErrExist), syscall.EEXIST},
		{"os.ErrPermission", wrap(os.ErrPermission), syscall.EACCES},
		// An errno beats a sentinel it is joined with: it is what the
		// cache file system said.
		{"errno and sentinel", errors.Join(cache.ErrReadOnly, syscall.ENOSPC), syscall.ENOSPC},
		{"unknown", errors.New("checksum mismatch"), syscall.EIO},
	} {
		f := &FS{log: slog.New(slog.DiscardHandler)}
		if got := f.toErrno(c.err); got != c.want {
			t.Errorf("%s: toErrno(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestToErrnoLogsUnknownOnce: an unexpected error is logged the first time
// its text is seen, so a failing disk cannot flood the log.
func TestToErrnoLogsUnknownOnce(t *testing.T) {
	var buf bytes.Buffer
	f := &FS{log: slog.New(slog.NewTextHandler(&buf, nil))}
	for range 3 {
		f.toErrno(errors.New("disk on fire"))
	}
	f.toErrno(errors.New("another"))
	if n := strings.Count(buf.String(), "disk on fire"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "another") {
		t.Fatalf("second distinct error not logged:\n%s", buf.String())
	}
}
