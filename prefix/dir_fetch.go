package prefix

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/files"
)

// Fetch copies entries (typically one node's share of a dataset's merged
// manifest) from srcDir, the dataset's prefix directory, to dstDir, its
// cache directory, creating dstDir and missing parents. With o.CRC it
// verifies every file's CRC32C while copying; sizes are always checked. A
// file that is missing, of another type, of another size, shorter than its
// size while being read, or with a different CRC32C makes Fetch return a
// *CorruptError naming it (possibly wrapped: use errors.As). Symbolic links
// are checked against the prefix and recreated from the manifest; directories
// are recreated from the manifest alone. Modes, mtimes and (when permitted)
// owners are restored exactly.
//
// Files are written in place, without fsync: on any error dstDir is left as
// it is for the caller to remove, and a dataset is usable only once Fetch
// returned nil. Entries are validated first: paths escaping dstDir or lying
// below a symlink are refused with ErrBadEntry before anything is written.
func Fetch(ctx context.Context, srcDir, dstDir string, entries []Entry, o Options) error {
	o = o.normalized()
	start := time.Now()
	dataset := filepath.Base(srcDir)
	var prog *progress
	err := fetch(ctx, srcDir, dstDir, entries, o, &prog)
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
		"seconds", time.Since(start).Seconds())
	return nil
}

func fetch(ctx context.Context, srcDir, dstDir string, entries []Entry, o Options, prog **progress) error {
	if err := checkEntries(entries); err != nil {
		return fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	// Work on a sorted copy: the caller's slice is not ours to reorder, and
	// the file tasks point into it.
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
	var (
		tasks []*fileTask
		total int64
	)
	for i := range es {
		e := &es[i]
		src, dst := filepath.Join(srcDir, e.Path), filepath.Join(dstDir, e.Path)
		switch e.Type {
		case files.Symlink:
			if err := fetchSymlink(src, dst, e); err != nil {
				return err
			}
		case files.Regular:
			tasks = append(tasks, &fileTask{e: e, src: src, dst: dst, name: dst, size: e.Size})
			total += e.Size
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	*prog = startProgress(o.Progress, total)
	if err := newCopier(ctx, o, tasks, true, *prog).run(); err != nil {
		return err
	}
	return finishDirs(dstDir, es, false, o.Streams)
}

// fetchSymlink checks that the prefix holds e's link and recreates it at
// dst from the manifest.
func fetchSymlink(src, dst string, e *Entry) error {
	target, err := os.Readlink(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &CorruptError{Path: src, Reason: "missing"}
	case errors.Is(err, syscall.EINVAL):
		return &CorruptError{Path: src, Reason: "is not a symbolic link, manifest says symlink"}
	case err != nil:
		return pathErr("readlink", src, err)
	case target != e.Target:
		return &CorruptError{Path: src, Reason: fmt.Sprintf("points to %q, manifest says %q", target, e.Target)}
	}
	if err := os.Symlink(e.Target, dst); err != nil {
		return pathErr("symlink", dst, err)
	}
	if e.UID != uint32(os.Geteuid()) || e.GID != uint32(os.Getegid()) {
		if err := os.Lchown(dst, int(e.UID), int(e.GID)); err != nil && !errors.Is(err, syscall.EPERM) {
			return pathErr("chown", dst, err)
		}
	}
	return wrapPath("set mtime of", dst, setMtime(dst, e.MtimeNs))
}
