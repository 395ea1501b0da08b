// Package atomicfile replaces small files so that a crash at any moment
// leaves either the old content or the new, never a mix: the one
// implementation behind the cache's state, the flush state, the prefix's
// index and manifests, and dataset records.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// TempPrefix is how the temporary copies of name begin: "."+name+".tmp-".
// Only name's single writer may remove leftovers of that form.
func TempPrefix(name string) string { return "." + name + ".tmp-" }

// WriteAt replaces name in the directory open as dir with data: a new
// temporary file next to it (O_EXCL|O_NOFOLLOW, so nothing planted is
// reused or followed) is written, given mode perm whatever the umask,
// fsynced and renamed over name, and the directory is fsynced.
func WriteAt(dir *os.File, name string, data []byte, perm os.FileMode) error {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return fmt.Errorf("atomic write: %q is not a file name", name)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := TempPrefix(name) + hex.EncodeToString(rnd[:])
	dfd := int(dir.Fd())
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(dir.Name(), tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir.Name(), tmp))
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if rerr := unix.Renameat(dfd, tmp, dfd, name); rerr != nil {
			err = &os.LinkError{Op: "rename", Old: tmp, New: filepath.Join(dir.Name(), name), Err: rerr}
		}
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return err
	}
	return SyncDir(dir)
}

// Write is WriteAt for the file at path, opening its directory for the
// call.
func Write(path string, data []byte, perm os.FileMode) error {
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return WriteAt(dir, filepath.Base(path), data, perm)
}

// SyncDir makes the entries of the open directory dir (creations, renames,
// removals) durable. File systems that cannot sync a directory (EINVAL)
// make them durable otherwise.
func SyncDir(dir *os.File) error {
	if err := dir.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}
