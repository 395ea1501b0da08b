package prefix

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/scrfs/scrfs/internal/atomicfile"
)

// The crash-safety primitives. On a parallel file system a rename is atomic
// for other clients, but it is durable only once the directory is synced,
// and a file's bytes only once the file is: so every metadata file goes
// tmp → fsync → rename → fsync dir, and every directory scrfs creates is
// followed by a sync of its parent.

// fsyncDir makes dir's entries (creations, renames, removals) durable.
func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return pathErr("open directory", dir, err)
	}
	err = atomicfile.SyncDir(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return pathErr("fsync directory", dir, err)
	}
	return nil
}

// mkdirAllSync is os.MkdirAll that also syncs the parent of every directory
// it creates, so a crash cannot lose a directory whose contents were synced.
// An existing non-directory is an error.
func mkdirAllSync(dir string, perm os.FileMode) error {
	st, err := os.Stat(dir)
	if err == nil {
		if !st.IsDir() {
			return pathErr("mkdir", dir, errors.New("exists and is not a directory"))
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return pathErr("stat", dir, err)
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSync(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil {
		// Another node may have created it in between: fine if it is a
		// directory now.
		if st, serr := os.Stat(dir); serr == nil && st.IsDir() {
			return nil
		}
		return pathErr("mkdir", dir, err)
	}
	return fsyncDir(parent)
}

// writeFileAtomic replaces path with data so that readers, and the file
// after a crash, see either the old or the new content in full (package
// atomicfile); its temporary copies have random names, so two writers never
// scribble into the same one.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	if err := atomicfile.Write(path, data, perm); err != nil {
		return pathErr("write", path, err)
	}
	return nil
}

// removeStaleTmp removes the temporary copies of path that a writer killed
// mid-write left behind. Only path's single writer (the lock holder for the
// index, node i for its part, the merging node for the manifest) calls it,
// so it never removes a temporary file that is still being written.
func removeStaleTmp(path string) error {
	dir, base := filepath.Split(path)
	names, err := readDirNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, atomicfile.TempPrefix(base)) {
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return pathErr("remove stale", filepath.Join(dir, n), err)
			}
		}
	}
	return nil
}

// readDirNames lists dir; a missing dir is empty.
func readDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, pathErr("open directory", dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, pathErr("read directory", dir, err)
	}
	return names, nil
}

// readSmallFile reads a metadata file, refusing absurd sizes so a corrupt
// or hostile prefix cannot make the daemon allocate gigabytes.
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetadataSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMetadataSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errTooLarge}
	}
	return b, nil
}

// maxMetadataSize bounds an index or manifest: 1 GiB is millions of entries.
const maxMetadataSize = 1 << 30

var errTooLarge = errors.New("metadata file larger than 1 GiB")
