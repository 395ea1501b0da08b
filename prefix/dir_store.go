package prefix

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/internal/atomicfile"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/internal/sleep"
	"github.com/scrfs/scrfs/layout"
)

// dirStore is a prefix that is a directory, typically on a parallel file
// system that other users can write to as well (a sticky scratch area).
// So nothing in it is reached by a path the kernel resolves from the
// start: the prefix directory is opened once and held (jobdir.Base: yours
// or root's, sticky if others may write to it, a final link only if yours
// or root's), .scrfs and the directories below it are opened one name at a
// time without following links and must be yours and closed to others'
// writes (jobdir.Dir.Sub, as the cache's per-user directories), and a
// dataset's directories are opened likewise (dirTable). Files are created
// exclusively in directories so verified, and their attributes set on the
// descriptor: a file or link another user planted makes the flush fail,
// naming it, and nothing outside the prefix is ever opened, created or
// changed.
type dirStore struct {
	path string
	// flock is unix.Flock; tests play a file system without locks.
	flock func(fd int, how int) error

	// mu protects held, the prefix directory once opened.
	mu   sync.Mutex
	held *jobdir.Dir
}

func newDirStore(path string) *dirStore { return &dirStore{path: path, flock: unix.Flock} }

func (s *dirStore) String() string           { return s.path }
func (s *dirStore) locate(rel string) string { return filepath.Join(s.path, filepath.FromSlash(rel)) }

// root returns the prefix directory, opening (and with create, making) it
// the first time. A held directory that was removed meanwhile (a test, an
// operator starting afresh) is opened again.
func (s *dirStore) root(create bool) (*jobdir.Dir, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil {
		var st unix.Stat_t
		if unix.Fstat(s.held.Fd(), &st) == nil && st.Nlink > 0 {
			return s.held, nil
		}
		s.held.Close()
		s.held = nil
	}
	d, err := jobdir.Base(s.path, create)
	if err != nil {
		return nil, err
	}
	s.held = d
	return d, nil
}

func (s *dirStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		return nil
	}
	err := s.held.Close()
	s.held = nil
	return err
}

// existingRoot returns the prefix directory, or nil (and no error) when
// there is none yet: the first flush makes it.
func (s *dirStore) existingRoot() (*jobdir.Dir, error) {
	root, err := s.root(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return root, err
}

func (s *dirStore) check(context.Context) error {
	root, err := s.existingRoot()
	if root == nil {
		return err
	}
	meta, err := root.Sub(layout.MetaDir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return meta.Close()
}

// metaDir opens the directory of metadata file name (".scrfs/manifests/x"
// for "manifests/x/node.0.json"), creating what is missing if create, and
// returns it with the file's own name. The caller closes it.
func (s *dirStore) metaDir(name string, create bool) (*jobdir.Dir, string, error) {
	root, err := s.root(create)
	if err != nil {
		return nil, "", err
	}
	parts := strings.Split(name, "/")
	d, err := root.Sub(layout.MetaDir, create)
	if err != nil {
		return nil, "", err
	}
	for _, p := range parts[:len(parts)-1] {
		next, err := d.Sub(p, create)
		d.Close()
		if err != nil {
			return nil, "", err
		}
		d = next
	}
	return d, parts[len(parts)-1], nil
}

func (s *dirStore) readMeta(_ context.Context, name string) ([]byte, error) {
	d, base, err := s.metaDir(name, false)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadFile(base, maxMetadataSize)
}

// writeMeta replaces name by atomicfile (temporary file, fsync, rename,
// fsync of the directory), after removing the temporary copies a writer
// killed mid-write left: each metadata file has one writer (the merging
// node, node i for its part, the lock holder for the index), so none of
// them is still being written.
func (s *dirStore) writeMeta(_ context.Context, name string, b []byte) error {
	d, base, err := s.metaDir(name, true)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := removeStaleTmp(d, base); err != nil {
		return err
	}
	return d.WriteFileAtomic(base, b, 0o644)
}

// removeStaleTmp removes the temporary copies of name in d that a writer
// killed mid-write left behind.
func removeStaleTmp(d *jobdir.Dir, name string) error {
	names, err := d.ReadDirNames()
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, atomicfile.TempPrefix(name)) {
			if err := d.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove stale: %w", err)
			}
		}
	}
	return nil
}

func (s *dirStore) removeMeta(_ context.Context, dataset string) error {
	d, base, err := s.metaDir(manifestsOf(dataset), false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return removeTreeAt(d, base)
}

func (s *dirStore) removeData(_ context.Context, dataset string) error {
	root, err := s.existingRoot()
	if root == nil {
		return err
	}
	return removeTreeAt(root, dataset)
}

func (s *dirStore) sweep(_ context.Context, dataset string) error {
	root, err := s.existingRoot()
	if root == nil {
		return err
	}
	return sweepAt(root.Fd(), dataset, root.Join(dataset))
}

// sweepAt removes the temporary files of flushes (tmpInfix) below the
// directory name in dirfd, never following a link. A missing directory is
// fine (nothing was flushed yet), and so is something else in its place:
// the flush's own walk refuses that, naming it.
func sweepAt(dirfd int, name, path string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP {
		return nil
	}
	if err != nil {
		return pathErr("open directory", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return pathErr("read directory", path, err)
	}
	for _, e := range entries {
		p := filepath.Join(path, e.Name())
		switch {
		case e.IsDir():
			if err := sweepAt(fd, e.Name(), p); err != nil {
				return err
			}
		case strings.Contains(e.Name(), tmpInfix):
			if err := unix.Unlinkat(fd, e.Name(), 0); err != nil && err != unix.ENOENT {
				return pathErr("remove", p, err)
			}
		}
	}
	return nil
}

// removeTreeAt removes name and everything below it in d, never following
// a link, then syncs d so the removal survives a crash. A missing name is
// fine.
func removeTreeAt(d *jobdir.Dir, name string) error {
	if err := removeAt(d.Fd(), name, d.Join(name)); err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		return pathErr("fsync directory", d.Path(), err)
	}
	return nil
}

func removeAt(dirfd int, name, path string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	switch {
	case err == nil || err == unix.ENOENT:
		return nil
	case err != unix.EISDIR:
		return pathErr("remove", path, err)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("open directory", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	names, err := f.Readdirnames(-1)
	if err == nil {
		for _, n := range names {
			if err = removeAt(fd, n, filepath.Join(path, n)); err != nil {
				break
			}
		}
	} else {
		err = pathErr("read directory", path, err)
	}
	f.Close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return pathErr("remove", path, err)
	}
	return nil
}

// updateIndex runs f under an exclusive flock on .scrfs/index.lock (a
// separate file, because the index itself is replaced by rename on every
// update and a lock on the old inode would protect nothing), polled so the
// wait ends with ctx. On file systems without flock (ENOTSUP, ENOLCK: NFS
// without lockd, Lustre without -o flock) it proceeds unlocked after a
// warning: every update is still atomic, but two concurrent updaters may
// lose one change, so scrfs keeps updates on node 0.
func (s *dirStore) updateIndex(ctx context.Context, lg *slog.Logger, f func([]byte) ([]byte, error)) error {
	meta, _, err := s.metaDir(indexName, true)
	if err != nil {
		return err
	}
	defer meta.Close()
	unlock, locked, err := lockIndex(ctx, meta, lg, s.flock)
	if err != nil {
		return err
	}
	defer unlock()
	if locked {
		// We are the only writer: any temporary index is a dead writer's.
		if err := removeStaleTmp(meta, indexName); err != nil {
			return err
		}
	}
	cur, err := meta.ReadFile(indexName, maxMetadataSize)
	if errors.Is(err, fs.ErrNotExist) {
		cur, err = nil, nil
	}
	if err != nil {
		return err
	}
	out, err := f(cur)
	if err != nil {
		return err
	}
	return meta.WriteFileAtomic(indexName, out, 0o644)
}

// Lock polling: a blocking flock cannot be interrupted by ctx, and an index
// update holds the lock for milliseconds, so polling costs little.
const (
	lockPollMin = time.Millisecond
	lockPollMax = 50 * time.Millisecond
)

// lockIndex takes the exclusive flock on index.lock in meta, waiting until
// ctx ends. It returns the release function and whether a lock is actually
// held (false on a file system without flock, after a warning).
func lockIndex(ctx context.Context, meta *jobdir.Dir, lg *slog.Logger, flock func(int, int) error) (func(), bool, error) {
	path := meta.Join("index.lock")
	f, err := meta.OpenFile("index.lock", os.O_RDWR|os.O_CREATE, 0o644)
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

// maxMetadataSize bounds an index or manifest: 1 GiB is millions of
// entries, and a corrupt or hostile prefix must not make the daemon
// allocate more.
const maxMetadataSize = 1 << 30
