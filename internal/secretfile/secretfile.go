// Package secretfile keeps small secrets in files that only their owner may
// read, as ssh keeps private keys: the job secret the daemons authenticate
// each other with, and the key that signs the prefix's manifests and index.
//
// A secret file is refused unless it is a regular file (not a link) that
// belongs to the user running scrfs — root included: a file another user
// owns could be changed by them — and that group and others may not read.
// The checks are made on the open file, so a rename in between changes
// nothing. New secrets are random, written to a temporary file and
// hard-linked into place, so that of several nodes creating the same file
// at once none reads a half-written one and all read the same.
package secretfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrExposed means a secret file can be read by users other than its owner.
var ErrExposed = errors.New("readable by group or others")

// ErrForeign means a secret file belongs to another user, who could change
// it.
var ErrForeign = errors.New("belongs to another user")

// maxSize bounds what is read: a secret is a line of hex.
const maxSize = 64 << 10

// Read returns the contents of the secret file at path; what names the
// secret in errors ("job secret").
func Read(path, what string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, linkError(err))
	}
	return read(os.NewFile(uintptr(fd), path), what)
}

// ReadOpen is Read for a file the caller opened (without following a
// link: from a verified directory, say); it closes f.
func ReadOpen(f *os.File, what string) ([]byte, error) { return read(f, what) }

func linkError(err error) error {
	if errors.Is(err, unix.ELOOP) {
		return errors.New("is a symbolic link; give the file it points to")
	}
	return err
}

func read(f *os.File, what string) ([]byte, error) {
	defer f.Close()
	path := f.Name()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	euid := os.Geteuid()
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s %s is not a regular file", what, path)
	case st != nil && int(st.Uid) != euid:
		return nil, fmt.Errorf("%s %s %w (uid %d), not to you (uid %d), who runs scrfs: its owner could change it; "+
			"use a file of your own (mode 0600)", what, path, ErrForeign, st.Uid, euid)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%s %s is %w: it has mode %04o; run chmod 600 %s (and choose a new one if others may have read it)",
			what, path, ErrExposed, fi.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSize))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return data, nil
}

// Create makes path hold n random bytes as a line of hex, mode 0600,
// unless it exists; its directory is created (mode 0700) if missing.
func Create(path string, n int) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return create(fd, dir, filepath.Base(path), n)
}

// CreateAt is Create for the file name in the directory open as dirfd,
// whose path is dir (for messages).
func CreateAt(dirfd int, dir, name string, n int) error { return create(dirfd, dir, name, n) }

func create(dirfd int, dir, name string, n int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return nil // Read checks what is there
	}
	raw := make([]byte, n)
	rand.Read(raw)
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(dir, tmp), Err: err}
	}
	defer unix.Unlinkat(dirfd, tmp, 0)
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	_, err = f.WriteString(hex.EncodeToString(raw) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Linkat(dirfd, tmp, dirfd, name, 0)
	}
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}
