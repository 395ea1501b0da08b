package prefix

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/files"
)

// tmpInfix marks a data file Flush is still writing:
// "<dir>/.<name>.scrfs-tmp.<node>". What a crashed flush left under such
// names the next flush of the dataset removes when it begins (sweep), and
// an operator can find them with `find -name '.*.scrfs-tmp.*'`. (Names too
// long for that get ".scrfs-tmp.<node>.<hash>", which matches too.)
const tmpInfix = ".scrfs-tmp."

// tmpName returns the temporary name, in the same directory, under which
// Flush writes the file called base.
func tmpName(base string, node int) string {
	name := "." + base + tmpInfix + strconv.Itoa(node)
	if len(name) > 255 {
		// Keep within NAME_MAX; the hash keeps distinct long names apart.
		sum := sha256.Sum256([]byte(base))
		name = tmpInfix + strconv.Itoa(node) + "." + hex.EncodeToString(sum[:12])
	}
	return name
}

// staged is a file or link written under its temporary name.
type staged struct {
	dir       *tableDir
	tmp, base string
}

// put writes every file and link under its temporary name next to its
// target, fsyncs every file, and only when all are written renames them
// into place and fsyncs the directories. So on any error — ctx ending
// included — no file or link of this flush is left under its final name,
// and the temporary files are removed (a crash may leave some; the next
// flush's BeginFlush and RemoveDataset remove them).
// Directories are made (several nodes may share them) as dirMode says;
// links are recreated, not followed; owners are copied when permitted,
// modes and mtimes always, all on the descriptors of files this flush
// created. What the directories are, dirTable says.
func (s *dirStore) put(ctx context.Context, dataset, srcDir string, node int, entries []Entry, o Options, prog *progress) error {
	root, err := s.root(true)
	if err != nil {
		return err
	}
	t := newDirTable(root, dataset, true, s.locate)
	defer t.close()
	if _, err := t.dir("", nil); err != nil {
		return err
	}
	var (
		tasks   []*fileTask
		pending []staged // not yet renamed, for cleanup
	)
	defer func() {
		for _, p := range pending {
			_ = unix.Unlinkat(int(p.dir.f.Fd()), p.tmp, 0) // best effort: the error being returned matters more
		}
	}()
	for i := range entries {
		e := &entries[i]
		switch e.Type {
		case files.Dir:
			if _, err := t.dir(e.Path, e); err != nil {
				return err
			}
		case files.Symlink, files.Regular:
			d, err := t.dir(parentOf(e.Path), nil)
			if err != nil {
				return err
			}
			base := path.Base(e.Path)
			st := staged{dir: d, tmp: tmpName(base, node), base: base}
			pending = append(pending, st)
			if e.Type == files.Symlink {
				if err := makeSymlinkAt(st, e, t.name(e.Path)); err != nil {
					return err
				}
				continue
			}
			tasks = append(tasks, &fileTask{e: e, srcDir: unix.AT_FDCWD, src: filepath.Join(srcDir, e.Path),
				srcName: filepath.Join(srcDir, e.Path), dstDir: int(d.f.Fd()), dst: st.tmp, name: t.name(e.Path), size: e.Size})
		}
	}
	if err := newCopier(ctx, o, tasks, false, prog).run(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Commit. Renames are the only step that makes files visible under
	// their names; if one fails, undo the others so a failed Flush leaves
	// none.
	for i, p := range pending {
		fd := int(p.dir.f.Fd())
		if err := unix.Renameat(fd, p.tmp, fd, p.base); err != nil {
			unrename(pending[:i])
			pending = pending[i:]
			return pathErr("rename into", t.name(path.Join(p.dir.rel, p.base)), err)
		}
	}
	renamed := pending
	pending = nil
	if err := t.finish(o.Streams); err != nil {
		// Not durable, so not flushed: take the files back out of sight.
		unrename(renamed)
		return err
	}
	return nil
}

// unrename removes files put renamed into place.
func unrename(done []staged) {
	for _, p := range done {
		_ = unix.Unlinkat(int(p.dir.f.Fd()), p.base, 0)
	}
}

// parentOf returns the directory of an entry path, "" for the dataset's.
func parentOf(p string) string {
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}

// makeSymlinkAt creates e's link at st's temporary name (replacing a
// leftover) with e's owner and mtime.
func makeSymlinkAt(st staged, e *Entry, name string) error {
	fd := int(st.dir.f.Fd())
	if err := unix.Unlinkat(fd, st.tmp, 0); err != nil && err != unix.ENOENT {
		return pathErr("remove leftover", name, err)
	}
	if err := unix.Symlinkat(e.Target, fd, st.tmp); err != nil {
		return pathErr("symlink", name, err)
	}
	if e.UID != uint32(os.Geteuid()) || e.GID != uint32(os.Getegid()) {
		if err := unix.Fchownat(fd, st.tmp, int(e.UID), int(e.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil && err != unix.EPERM {
			return pathErr("chown", name, err)
		}
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(e.MtimeNs)}
	return wrapPath("set mtime of", name, unix.UtimesNanoAt(fd, st.tmp, ts, unix.AT_SYMLINK_NOFOLLOW))
}
