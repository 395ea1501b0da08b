package prefix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
)

// Flush and Fetch: what every store shares of moving a node's share of a
// dataset — the entries, the progress, the metrics, the cache side of a
// fetch — around the store's own copy (store.put, store.get).

// Flush copies node's files of dataset, those list names (a member's file
// list, as the dataset's record has it), from srcDir, the dataset's cache
// directory, to the prefix, and returns the entries for node's manifest
// part, sorted by path (CRCs filled in when o.CRC is set). Flush does not
// walk srcDir: the dataset must not change while Flush runs nor since the
// list was made, and a file found of another type or size than listed
// fails it.
//
// What a failed Flush leaves depends on the store (a directory: nothing
// under a final name; an object store: what it uploaded, until
// RemoveDataset); either way the index does not call the dataset complete
// until CompleteFlush. The directory's promises are on dirStore.put.
//
// Errors read "flush <dataset>: <op> <where>: <cause>" and wrap the cause
// (errors.Is(err, syscall.ENOSPC) works).
func (p *Prefix) Flush(ctx context.Context, dataset, srcDir string, node int, list []files.Meta, o Options) ([]Entry, error) {
	o = o.normalized()
	start := time.Now()
	var prog *progress
	entries, err := p.flush(ctx, dataset, srcDir, node, list, o, &prog)
	var count, bytes int64
	if prog != nil {
		prog.finish()
		bytes = prog.done.Load()
		count = int64(countFiles(entries))
	}
	o.Metrics.observe("flush", count, bytes, time.Since(start), err)
	if err != nil {
		o.Logger.Warn("flush failed", "dataset", dataset, "err", err)
		return nil, fmt.Errorf("flush %s: %w", dataset, err)
	}
	o.Logger.Debug("flushed", "dataset", dataset, "files", count, "bytes", bytes,
		"seconds", time.Since(start).Seconds(), "to", p.s.locate(dataset))
	return entries, nil
}

func countFiles(es []Entry) int {
	n := 0
	for i := range es {
		if es[i].Type == files.Regular {
			n++
		}
	}
	return n
}

// flush is Flush without the bookkeeping. It sets *prog once copying
// starts, so the caller can make the final Progress call.
func (p *Prefix) flush(ctx context.Context, dataset, srcDir string, node int, list []files.Meta, o Options, prog **progress) ([]Entry, error) {
	if err := layout.CheckDatasetName(dataset); err != nil {
		return nil, err
	}
	if node < 0 {
		return nil, fmt.Errorf("%w: negative node %d", ErrBadEntry, node)
	}
	// One stat, so a share whose directory is gone says so, whatever its
	// list holds.
	if st, err := os.Stat(srcDir); err != nil {
		return nil, pathErr("stat", srcDir, err)
	} else if !st.IsDir() {
		return nil, pathErr("stat", srcDir, syscall.ENOTDIR)
	}
	entries, err := entriesOf(list, node)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var total int64
	for i := range entries {
		if entries[i].Type == files.Regular {
			total += entries[i].Size
		}
	}
	*prog = startProgress(o.Progress, total)
	if err := p.s.put(ctx, dataset, srcDir, node, entries, o, *prog); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return entries, nil
}

// Fetch copies entries (typically one node's share of a dataset's merged
// manifest) of dataset from the prefix to dstDir, its cache directory,
// creating dstDir and missing parents. With o.CRC it verifies every file's
// CRC32C while copying; sizes are always checked. A file that is missing,
// of another type, of another size, shorter than its size while being
// read, or with a different CRC32C makes Fetch return a *CorruptError
// naming it (possibly wrapped: use errors.As). Symbolic links are checked
// against the prefix where it keeps them and recreated from the manifest;
// directories are recreated from the manifest alone. Modes, mtimes and
// (when permitted) owners are restored exactly.
//
// Files are written in place, without fsync: on any error dstDir is left as
// it is for the caller to remove, and a dataset is usable only once Fetch
// returned nil. Entries are validated first: paths escaping dstDir or lying
// below a symlink are refused with ErrBadEntry before anything is written.
func (p *Prefix) Fetch(ctx context.Context, dataset, dstDir string, entries []Entry, o Options) error {
	o = o.normalized()
	start := time.Now()
	var prog *progress
	err := p.fetch(ctx, dataset, dstDir, entries, o, &prog)
	var bytes int64
	if prog != nil {
		prog.finish()
		bytes = prog.done.Load()
	}
	files := int64(0)
	if err == nil {
		files = int64(countFiles(entries))
	}
	o.Metrics.observe("fetch", files, bytes, time.Since(start), err)
	if err != nil {
		o.Logger.Warn("fetch failed", "dataset", dataset, "err", err)
		return fmt.Errorf("fetch %s: %w", dataset, err)
	}
	o.Logger.Debug("fetched", "dataset", dataset, "files", files, "bytes", bytes,
		"seconds", time.Since(start).Seconds(), "from", p.s.locate(dataset))
	return nil
}

func (p *Prefix) fetch(ctx context.Context, dataset, dstDir string, entries []Entry, o Options, prog **progress) error {
	if err := layout.CheckDatasetName(dataset); err != nil {
		return err
	}
	if err := checkEntries(entries); err != nil {
		return fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	// Work on a sorted copy: the caller's slice is not ours to reorder, and
	// the store's file tasks point into it.
	es := append([]Entry(nil), entries...)
	sortEntries(es)
	if err := os.MkdirAll(dstDir, 0o700); err != nil {
		return pathErr("mkdir", dstDir, err)
	}
	// Every directory an entry needs, parents before children. Created
	// owner-writable; exact modes come last, in finishDirs.
	need := map[string]bool{}
	for i := range es {
		for d := filepath.Dir(es[i].Path); d != "." && !need[d]; d = filepath.Dir(d) {
			need[d] = true
		}
		if es[i].Type == files.Dir {
			need[es[i].Path] = true
		}
	}
	dirs := make([]string, 0, len(need))
	for d := range need {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		if err := makeDir(filepath.Join(dstDir, d), 0o700); err != nil {
			return err
		}
	}
	var total int64
	for i := range es {
		e := &es[i]
		switch e.Type {
		case files.Symlink:
			if err := p.s.linkOK(ctx, dataset, e); err != nil {
				return err
			}
			if err := restoreSymlink(filepath.Join(dstDir, e.Path), e); err != nil {
				return err
			}
		case files.Regular:
			total += e.Size
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	*prog = startProgress(o.Progress, total)
	if err := p.s.get(ctx, dataset, dstDir, es, o, *prog); err != nil {
		return err
	}
	return restoreDirs(dstDir, es)
}

// makeDir creates dir in the cache with mode, or accepts it if it exists
// as a directory. The mode is applied explicitly: umask must not narrow
// what the application chose.
func makeDir(dir string, mode uint32) error {
	err := syscall.Mkdir(dir, mode)
	if err == nil {
		return wrapPath("chmod", dir, syscall.Chmod(dir, mode))
	}
	if err == syscall.EEXIST {
		if st, serr := os.Lstat(dir); serr == nil && st.IsDir() {
			return nil
		}
	}
	return pathErr("mkdir", dir, err)
}

func wrapPath(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return pathErr(op, path, err)
}

// restoreSymlink recreates e's link at dst in the cache from the manifest.
func restoreSymlink(dst string, e *Entry) error {
	if err := os.Symlink(e.Target, dst); err != nil {
		return pathErr("symlink", dst, err)
	}
	if e.UID != uint32(os.Geteuid()) || e.GID != uint32(os.Getegid()) {
		if err := os.Lchown(dst, int(e.UID), int(e.GID)); err != nil && !errors.Is(err, syscall.EPERM) {
			return pathErr("chown", dst, err)
		}
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(e.MtimeNs)}
	return wrapPath("set mtime of", dst, unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW))
}

// restoreDirs applies the directories' exact owners, modes and mtimes in
// the cache, deepest first (creating entries in a directory changes its
// mtime).
func restoreDirs(root string, entries []Entry) error {
	for i := len(entries) - 1; i >= 0; i-- {
		e := &entries[i]
		if e.Type != files.Dir {
			continue
		}
		p := filepath.Join(root, e.Path)
		if e.UID != uint32(os.Geteuid()) || e.GID != uint32(os.Getegid()) {
			if err := os.Lchown(p, int(e.UID), int(e.GID)); err != nil && !errors.Is(err, syscall.EPERM) {
				return pathErr("chown", p, err)
			}
		}
		if err := syscall.Chmod(p, e.Mode); err != nil {
			return pathErr("chmod", p, err)
		}
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(e.MtimeNs)}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return pathErr("set mtime of", p, err)
		}
	}
	return nil
}

// setAttrs gives the file open as fd, which this call created, e's owner
// (when permitted), mode and mtime: on the descriptor, never by a name
// someone could have replaced.
func setAttrs(fd int, e *Entry, name string) error {
	// chown before chmod: chown clears setuid and setgid bits.
	if e.UID != uint32(os.Geteuid()) || e.GID != uint32(os.Getegid()) {
		if err := unix.Fchown(fd, int(e.UID), int(e.GID)); err != nil && err != unix.EPERM {
			return pathErr("chown", name, err)
		}
	}
	if err := unix.Fchmod(fd, e.Mode); err != nil {
		return pathErr("chmod", name, err)
	}
	return wrapPath("set mtime of", name, futimens(fd, e.MtimeNs))
}

// futimens sets the mtime of the file open as fd and leaves its atime.
// (x/sys/unix has no futimens; utimensat with a NULL path is it.)
func futimens(fd int, ns int64) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(ns)}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
