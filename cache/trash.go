package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The trash. Taking a dataset out of the cache is one rename into the
// trash, under the store's lock; its bytes are deleted later by the
// store's emptier goroutine, off every lock.
//
// Deleting a dataset frees its pages, and on tmpfs that costs CPU by the
// byte: while 4 nodes protected checkpoints of 256 MiB each, deleting the
// ones they evicted was a tenth of the daemons' CPU, and the pages it freed
// went back to a VM's host just as the encode allocated new ones. Nothing
// waits for those bytes but free space, so deletes wait while a dataset's
// redundancy is being applied — from its record's arrival (SetRecord, for
// a dataset not yet protected) to Settled — as SCR deletes old checkpoints
// when the next one starts, not while one is encoded. They go ahead at
// once when the cache's file system could not take another dataset as
// large as the largest it holds (looked at every spaceCheck while they
// wait: writes through passthrough never reach the daemon), and after
// maxDeferral whatever happens.
const (
	maxDeferral = 2 * time.Minute
	spaceCheck  = time.Second
)

// What stops emptying the trash before a file: deletes wait, or the store
// closes (the next start goes on).
var (
	errDeferred = errors.New("deletes deferred")
	errClosing  = errors.New("cache closing")
)

func (s *Store) trashDir() string {
	return filepath.Join(s.CacheDir(), metaDirName, "trash")
}

// toTrash moves a dataset directory out of the way in one rename, after its
// redundancy files were set aside as spares; the emptier deletes the bytes.
func (s *Store) toTrash(dir string, id uint64) error {
	if err := os.MkdirAll(s.trashDir(), 0o700); err != nil {
		return err
	}
	s.setAsideSpares(dir)
	dst := filepath.Join(s.trashDir(), strconv.FormatUint(id, 10)+"."+filepath.Base(dir))
	if err := os.Rename(dir, dst); err != nil {
		return fmt.Errorf("move %s to trash: %w", dir, err)
	}
	return nil
}

// Settled tells the store that dataset name's redundancy is settled here
// (protected, degraded, or its metadata recorded for SINGLE), so deletes
// need no longer wait for it. It reports Settled.
func (s *Store) Settled(name string) {
	s.mu.Lock()
	d := s.datasets[name]
	info := Info{Name: name} // flushes waiting for a dataset gone meanwhile go on too
	if d != nil {
		d.mu.Lock()
		d.settleBy = time.Time{}
		info = d.infoLocked()
		d.mu.Unlock()
	}
	s.mu.Unlock()
	s.arrived(name)
	s.emptyTrashSoon()
	s.reportInfo(EventSettled, info)
	s.evict()
}

// emptyTrashSoon wakes the emptier.
func (s *Store) emptyTrashSoon() {
	select {
	case s.trashWake <- struct{}{}:
	default:
	}
}

// emptier empties the trash when woken, and while deletes wait every
// spaceCheck, starting with what a daemon that crashed left there, until
// the store closes.
func (s *Store) emptier() {
	defer close(s.emptied)
	expiry := time.NewTimer(maxDeferral)
	expiry.Stop()
	defer expiry.Stop()
	for {
		wait := s.emptyTrash()
		if wait > 0 {
			expiry.Reset(min(wait, spaceCheck))
		}
		if s.opts.emptied != nil {
			s.opts.emptied(wait)
		}
		select {
		case <-s.trashWake:
		case <-expiry.C:
		case <-s.stop:
			return
		}
	}
}

// emptyTrash deletes what is in the trash, file by file. When deletes must
// wait, it stops and returns how long they may wait at most.
func (s *Store) emptyTrash() time.Duration {
	entries, err := os.ReadDir(s.trashDir())
	if err != nil {
		return 0
	}
	w := &trashWalk{s: s}
	for _, e := range entries {
		err := w.deleteTree(s.trashDir(), e.Name(), e.IsDir())
		switch {
		case errors.Is(err, errDeferred):
			return w.wait
		case errors.Is(err, errClosing):
			return 0
		case err != nil:
			s.log.Warn("empty cache trash", "entry", e.Name(), "err", err)
		}
	}
	return 0
}

// deferCheck is how often a trash walk asks whether deletes must wait:
// the answer takes the store's lock, which a walk through thousands of
// small files should not take once per file.
const deferCheck = 10 * time.Millisecond

// trashWalk deletes trees from the trash, file by file.
type trashWalk struct {
	s     *Store
	check time.Time     // when to ask again whether deletes must wait
	wait  time.Duration // how long they must, once goOn said errDeferred
}

// goOn says whether the walk may delete another file: errClosing once the
// store closes, errDeferred while deletes wait.
func (w *trashWalk) goOn() error {
	select {
	case <-w.s.stop:
		return errClosing
	default:
	}
	if now := time.Now(); !now.Before(w.check) {
		if w.wait = w.s.deferral(); w.wait > 0 {
			return errDeferred
		}
		w.check = now.Add(deferCheck)
	}
	return nil
}

// deleteTree deletes name in directory dir, and everything below it when
// it is a directory, by descriptors (a dataset's tree may be deeper than a
// path can name), stopping before a file when goOn says so.
func (w *trashWalk) deleteTree(dir, name string, isDir bool) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return w.deleteAt(fd, name, isDir)
}

func (w *trashWalk) deleteAt(dirfd int, name string, isDir bool) error {
	if !isDir {
		if err := w.goOn(); err != nil {
			return err
		}
		return ignoreGone(unix.Unlinkat(dirfd, name, 0))
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return ignoreGone(err)
	}
	f := os.NewFile(uintptr(fd), name)
	entries, err := f.ReadDir(-1)
	if err == nil {
		for _, e := range entries {
			if err = w.deleteAt(fd, e.Name(), e.IsDir()); err != nil {
				break
			}
		}
	}
	f.Close()
	if err != nil {
		return err
	}
	return ignoreGone(unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR))
}

func ignoreGone(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// deferral returns how long deletes must still wait at most: 0 when no
// dataset's redundancy is being applied, or the cache is short of space.
func (s *Store) deferral() time.Duration {
	now := time.Now()
	var wait time.Duration
	var largest int64
	s.mu.Lock()
	for _, d := range s.datasets {
		d.mu.Lock()
		if now.Before(d.settleBy) {
			wait = max(wait, d.settleBy.Sub(now))
		}
		largest = max(largest, d.bytes)
		d.mu.Unlock()
	}
	s.mu.Unlock()
	if wait == 0 {
		return 0
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.CacheDir(), &st); err != nil || int64(st.Bavail)*st.Bsize < largest {
		return 0
	}
	return wait
}
