package prefix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/internal/sleep"
	"github.com/scrfs/scrfs/layout"
)

// IndexPath returns <prefix>/.scrfs/index.json.
func IndexPath(prefix string) string {
	return filepath.Join(layout.PrefixMetaDir(prefix), "index.json")
}

// indexLockPath is the file UpdateIndex flocks. A separate file, because the
// index itself is replaced by rename on every update and a lock on the old
// inode would protect nothing.
func indexLockPath(prefix string) string {
	return filepath.Join(layout.PrefixMetaDir(prefix), "index.lock")
}

// ReadIndex returns the job index. A prefix without an index (nothing
// flushed yet) has an empty one, not an error; a corrupt index is an error
// wrapping ErrBadMetadata that names the file.
func ReadIndex(prefix string) (*Index, error) {
	path := IndexPath(prefix)
	b, err := readSmallFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return emptyIndex(), nil
	}
	if err != nil {
		return nil, pathErr("read index", path, err)
	}
	ix, err := decodeIndex(b)
	if err != nil {
		return nil, fmt.Errorf("read index %s: %w", path, err)
	}
	return ix, nil
}

// errNoWrite, returned by an UpdateIndex callback, ends the update without
// writing and without error.
var errNoWrite = errors.New("index unchanged")

// UpdateIndex runs f on the current index and replaces the index with the
// result, atomically and durably, while holding an exclusive flock on
// <prefix>/.scrfs/index.lock, so concurrent updaters on any node are
// serialised and none loses another's change. If f returns an error, or the
// result does not validate, the index is left as it was. A corrupt index is
// never overwritten: the error wraps ErrBadMetadata.
//
// Waiting for the lock ends with ctx. On file systems that do not support
// flock (ENOTSUP, ENOLCK: NFS without lockd, some Lustre mounts without
// -o flock) the update proceeds unlocked after a warning on lg (nil: no
// log); the index is still replaced atomically, but two concurrent updaters
// may then lose one change, so the caller should keep updates to one node.
//
// (Refined from the brief: ctx and lg were added for the lock wait and the
// warning.)
func UpdateIndex(ctx context.Context, prefix string, lg *slog.Logger, f func(*Index) error) error {
	err := updateIndex(ctx, prefix, lg, f, unix.Flock)
	if errors.Is(err, errNoWrite) {
		return nil
	}
	return err
}

// updateIndex is UpdateIndex with the flock call injectable, so tests can
// play a file system without locks.
func updateIndex(ctx context.Context, prefix string, lg *slog.Logger, f func(*Index) error,
	flock func(fd int, how int) error) error {
	if lg == nil {
		lg = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	path := IndexPath(prefix)
	if err := mkdirAllSync(layout.PrefixMetaDir(prefix), 0o755); err != nil {
		return fmt.Errorf("update index: %w", err)
	}
	unlock, locked, err := lockIndex(ctx, indexLockPath(prefix), lg, flock)
	if err != nil {
		return fmt.Errorf("update index %s: %w", path, err)
	}
	defer unlock()
	if locked {
		// We are the only writer: any temporary index is a dead writer's.
		if err := removeStaleTmp(path); err != nil {
			return fmt.Errorf("update index: %w", err)
		}
	}
	ix, err := ReadIndex(prefix)
	if err != nil {
		return fmt.Errorf("update index: %w", err)
	}
	if err := f(ix); err != nil {
		return err
	}
	ix.Version = FormatVersion
	if ix.Datasets == nil {
		ix.Datasets = []IndexEntry{}
	}
	if err := ix.validate(); err != nil {
		return fmt.Errorf("update index %s: refusing to write an invalid index: %w", path, err)
	}
	ix.sort()
	b, err := encodeIndex(ix)
	if err != nil {
		return fmt.Errorf("update index %s: %w", path, err)
	}
	if err := writeFileAtomic(path, b, 0o644); err != nil {
		return fmt.Errorf("update index: %w", err)
	}
	return nil
}

// Lock polling: a blocking flock cannot be interrupted by ctx, and an index
// update holds the lock for milliseconds, so polling costs little.
const (
	lockPollMin = time.Millisecond
	lockPollMax = 50 * time.Millisecond
)

// lockIndex takes the exclusive flock on path, waiting until ctx ends. It
// returns the release function and whether a lock is actually held (false
// on a file system without flock, after a warning).
func lockIndex(ctx context.Context, path string, lg *slog.Logger, flock func(int, int) error) (func(), bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, pathErr("open lock", path, err)
	}
	fd := int(f.Fd())
	b := sleep.Backoff{Min: lockPollMin, Max: lockPollMax}
	for {
		err := flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch err {
		case nil:
			return func() { _ = flock(fd, unix.LOCK_UN); f.Close() }, true, nil
		case unix.EINTR:
			continue
		case unix.EWOULDBLOCK:
			if err := b.Wait(ctx); err != nil {
				f.Close()
				return nil, false, fmt.Errorf("wait for lock %s: %w", path, err)
			}
			continue
		case unix.ENOTSUP, unix.ENOLCK:
			lg.Warn("the prefix file system does not support flock; updating the index without a lock. "+
				"Concurrent updates from several nodes may be lost: mount it with flock support (Lustre: -o flock)",
				"lock", path, "err", err)
			f.Close()
			return func() {}, false, nil
		default:
			f.Close()
			return nil, false, pathErr("flock", path, err)
		}
	}
}
