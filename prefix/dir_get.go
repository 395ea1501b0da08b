package prefix

import (
	"context"
	"fmt"
	"io"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/files"
)

// get copies the files from the dataset's directories, each opened by one
// name in its verified parent (dirTable) without following a link, into
// the cache.
func (s *dirStore) get(ctx context.Context, dataset, dstDir string, es []Entry, o Options, prog *progress) error {
	t, err := s.table(dataset, es)
	if err != nil {
		return err
	}
	defer t.close()
	var tasks []*fileTask
	for i := range es {
		e := &es[i]
		if e.Type != files.Regular {
			continue
		}
		d, err := t.dir(parentOf(e.Path), nil)
		if err != nil {
			return err
		}
		dst := filepath.Join(dstDir, e.Path)
		tasks = append(tasks, &fileTask{e: e, srcDir: int(d.f.Fd()), src: path.Base(e.Path), srcName: t.name(e.Path),
			dstDir: unix.AT_FDCWD, dst: dst, name: dst, size: e.Size})
	}
	return newCopier(ctx, o, tasks, true, prog).run()
}

// table opens the dataset's directories for reading, knowing the
// directory entries of es (a root daemon's flush gave them the
// application's owners, which verify accepts).
func (s *dirStore) table(dataset string, es []Entry) (*dirTable, error) {
	root, err := s.root(false)
	if err != nil {
		return nil, &CorruptError{Path: s.locate(dataset), Reason: err.Error()}
	}
	t := newDirTable(root, dataset, false, s.locate)
	for i := range es {
		if es[i].Type == files.Dir {
			t.known[es[i].Path] = &es[i]
		}
	}
	return t, nil
}

// linkOK checks that the prefix holds e's link with the manifest's target.
func (s *dirStore) linkOK(_ context.Context, dataset string, e *Entry) error {
	t, err := s.table(dataset, nil)
	if err != nil {
		return err
	}
	defer t.close()
	d, err := t.dir(parentOf(e.Path), nil)
	if err != nil {
		return err
	}
	name := t.name(e.Path)
	buf := make([]byte, maxPath)
	n, err := unix.Readlinkat(int(d.f.Fd()), path.Base(e.Path), buf)
	switch {
	case err == unix.ENOENT:
		return &CorruptError{Path: name, Reason: "missing"}
	case err == unix.EINVAL:
		return &CorruptError{Path: name, Reason: "is not a symbolic link, manifest says symlink"}
	case err != nil:
		return pathErr("readlink", name, err)
	case string(buf[:n]) != e.Target:
		return &CorruptError{Path: name, Reason: fmt.Sprintf("points to %q, manifest says %q", buf[:n], e.Target)}
	}
	return nil
}

// readAt reads from e's file, opened by one name in its verified parent
// without following a link, as get does.
func (s *dirStore) readAt(_ context.Context, dataset string, e *Entry, off int64, buf []byte) (string, error) {
	t, err := s.table(dataset, nil)
	if err != nil {
		return s.locate(dataset + "/" + e.Path), err
	}
	defer t.close()
	name := t.name(e.Path)
	d, err := t.dir(parentOf(e.Path), nil)
	if err != nil {
		return name, err
	}
	f, err := openPrefixFile(int(d.f.Fd()), path.Base(e.Path), name, e.Size)
	if err != nil {
		return name, err
	}
	defer f.Close()
	if n, err := f.ReadAt(buf, off); err != nil {
		if err == io.EOF {
			return name, truncated(name, off+int64(n), e.Size)
		}
		return name, pathErr("read", name, err)
	}
	return name, nil
}
