package prefix

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/files"
)

// tmpInfix marks a data file Flush is still writing:
// "<dir>/.<name>.scrfs-tmp.<node>". The name is fixed per file and node, so
// a retried flush truncates and reuses what a crashed one left, and an
// operator can find leftovers with `find -name '.*.scrfs-tmp.*'`. (Names
// too long for that get ".scrfs-tmp.<node>.<hash>", which matches too.)
const tmpInfix = ".scrfs-tmp."

// tmpName returns the temporary name Flush writes final's bytes under.
func tmpName(final string, node int) string {
	dir, base := filepath.Split(final)
	name := "." + base + tmpInfix + strconv.Itoa(node)
	if len(name) > 255 {
		// Keep within NAME_MAX; the hash keeps distinct long names apart.
		sum := sha256.Sum256([]byte(base))
		name = tmpInfix + strconv.Itoa(node) + "." + hex.EncodeToString(sum[:12])
	}
	return dir + name
}

// Flush copies node's files of one dataset, those list names (a member's
// file list, as the dataset's record has it), from srcDir, the dataset's
// cache directory, to dstDir, its directory in the prefix, and returns the
// entries for node's manifest part, sorted by path (CRCs filled in when
// o.CRC is set). Flush does not walk srcDir: the dataset must not change
// while Flush runs nor since the list was made, and a file found of another
// type or size than listed fails it.
//
// Files are written under temporary names next to their targets, and every
// one is fsynced; only when all are written does Flush rename them into
// place and fsync the directories. So on any error — including ctx ending —
// no file or link Flush wrote is left under its final name, and Flush
// removes its temporary files (a crash may leave some; the next Flush of the same node
// reuses them, RemoveDataset deletes them). Directories are created
// (several nodes may share them) with the recorded mode plus owner rwx, so
// other nodes of the job can still add files; the manifest keeps the exact
// mode, which Fetch restores. Symbolic links are recreated, not followed.
// Owners are copied when permitted, modes and mtimes always.
//
// Errors read "flush <dataset>: <op> <path>: <cause>" and wrap the cause
// (errors.Is(err, syscall.ENOSPC) works).
func Flush(ctx context.Context, srcDir, dstDir string, node int, list []files.Meta, o Options) ([]Entry, error) {
	o = o.normalized()
	start := time.Now()
	dataset := filepath.Base(dstDir)
	var prog *progress
	entries, err := flush(ctx, srcDir, dstDir, node, list, o, &prog)
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
		"seconds", time.Since(start).Seconds())
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
func flush(ctx context.Context, srcDir, dstDir string, node int, list []files.Meta, o Options, prog **progress) ([]Entry, error) {
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
	if err := mkdirAllSync(dstDir, 0o755); err != nil {
		return nil, err
	}
	var (
		tasks   []*fileTask
		pending []string // temporary names not yet renamed, for cleanup
		finals  []string // their final names, in the same order
		total   int64
	)
	defer func() {
		for _, p := range pending {
			_ = os.Remove(p) // best effort: the error being returned matters more
		}
	}()
	for i := range entries {
		e := &entries[i]
		final := filepath.Join(dstDir, e.Path)
		switch e.Type {
		case files.Dir:
			if err := makeDir(final, e.Mode|0o700); err != nil {
				return nil, err
			}
		case files.Symlink:
			tmp := tmpName(final, node)
			pending, finals = append(pending, tmp), append(finals, final)
			if err := makeSymlink(tmp, final, e); err != nil {
				return nil, err
			}
		case files.Regular:
			tmp := tmpName(final, node)
			pending, finals = append(pending, tmp), append(finals, final)
			tasks = append(tasks, &fileTask{e: e, src: filepath.Join(srcDir, e.Path), dst: tmp, name: final, size: e.Size})
			total += e.Size
		}
	}
	*prog = startProgress(o.Progress, total)
	if err := newCopier(ctx, o, tasks, false, *prog).run(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Commit. Renames are the only step that makes files visible under their
	// names; if one fails, undo the others so a failed Flush leaves none.
	for i, tmp := range pending {
		if err := os.Rename(tmp, finals[i]); err != nil {
			for _, f := range finals[:i] {
				_ = os.Remove(f)
			}
			pending = pending[i:]
			return nil, pathErr("rename into", finals[i], err)
		}
	}
	pending = nil
	if err := finishDirs(dstDir, entries, true, o.Streams); err != nil {
		// Not durable, so not flushed: take the files back out of sight.
		for _, f := range finals {
			_ = os.Remove(f)
		}
		return nil, err
	}
	return entries, nil
}

// makeDir creates dir with mode, or accepts it if it exists as a directory
// (another node made it). The mode is applied explicitly: umask must not
// narrow what the application chose.
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

// makeSymlink creates e's link at tmp (replacing a leftover) with e's owner
// and mtime.
func makeSymlink(tmp, final string, e *Entry) error {
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return pathErr("remove leftover", tmp, err)
	}
	if err := os.Symlink(e.Target, tmp); err != nil {
		return pathErr("symlink", final, err)
	}
	if err := os.Lchown(tmp, int(e.UID), int(e.GID)); err != nil && !errors.Is(err, syscall.EPERM) {
		return pathErr("chown", final, err)
	}
	return wrapPath("set mtime of", final, setMtime(tmp, e.MtimeNs))
}

// finishDirs applies the directories' owners, modes and mtimes, deepest
// first (creating entries in a directory changes its mtime), then, for
// Flush, fsyncs every directory so the renames and creations are durable.
// Flush keeps owner rwx on directories; Fetch applies the exact modes.
func finishDirs(root string, entries []Entry, flush bool, streams int) error {
	dirs := []string{root}
	for i := len(entries) - 1; i >= 0; i-- {
		e := &entries[i]
		if e.Type != files.Dir {
			continue
		}
		p := filepath.Join(root, e.Path)
		dirs = append(dirs, p)
		mode := e.Mode
		if flush {
			mode |= 0o700
		}
		if e.UID != uint32(os.Geteuid()) || e.GID != uint32(os.Getegid()) {
			if err := os.Lchown(p, int(e.UID), int(e.GID)); err != nil && !errors.Is(err, syscall.EPERM) {
				return pathErr("chown", p, err)
			}
		}
		if err := syscall.Chmod(p, mode); err != nil {
			return pathErr("chmod", p, err)
		}
		if err := setMtime(p, e.MtimeNs); err != nil {
			return pathErr("set mtime of", p, err)
		}
	}
	if !flush {
		return nil
	}
	return parallel(dirs, streams, fsyncDir)
}

// parallel runs f on every item with up to n goroutines and returns the
// first error. Directory syncs on a parallel file system are round trips;
// doing them one by one would dominate a flush of many directories.
func parallel(items []string, n int, f func(string) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan string)
	)
	for range min(n, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				if err := f(it); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		next <- it
	}
	close(next)
	wg.Wait()
	return first
}
