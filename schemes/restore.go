package schemes

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/files"
)

// place puts a rebuilt member's dataset into dir: staged regular files
// (stage/<index>, already verified against their CRCs) are renamed into
// place, directories, symlinks and hard links are recreated, then owners,
// modes and times are applied. Entries already in dir with a recorded name
// are replaced; other entries are left alone.
func place(dir, stage string, list []files.Meta, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("restore %s: %w", dir, err)
	}
	reg := 0
	for _, f := range list {
		full := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("restore %s: %w", f.Path, err)
		}
		var err error
		switch f.Type {
		case files.Dir:
			if fi, e := os.Lstat(full); e == nil && !fi.IsDir() {
				err = os.Remove(full)
			}
			if err == nil {
				err = os.MkdirAll(full, 0o700)
			}
		case files.Regular:
			// Staged files sit on the same file system, so the rename is
			// atomic: a path holds either the old entry or the verified file.
			if err = clearFor(full); err == nil {
				err = os.Rename(filepath.Join(stage, strconv.Itoa(reg)), full)
			}
			reg++
		case files.Symlink:
			if err = clearFor(full); err == nil {
				err = os.Symlink(f.Target, full)
			}
		case files.HardLink:
			if err = clearFor(full); err == nil {
				err = os.Link(filepath.Join(dir, filepath.FromSlash(f.Target)), full)
			}
		}
		if err != nil {
			return fmt.Errorf("restore %s: %w", f.Path, err)
		}
	}
	// Owners before modes: chown clears setuid and setgid bits.
	for _, f := range list {
		if f.Type == files.HardLink {
			continue // same inode as its target, whose entry sets everything
		}
		full := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.Lchown(full, int(f.UID), int(f.GID)); err != nil {
			if !errors.Is(err, os.ErrPermission) {
				return fmt.Errorf("restore owner of %s: %w", f.Path, err)
			}
			// An unprivileged daemon cannot give files away; the data and
			// the rest of the metadata are still right.
			log.Warn("cannot restore owner", "path", f.Path, "uid", f.UID, "gid", f.GID, "err", err)
		}
		if f.Type != files.Symlink {
			if err := os.Chmod(full, os.FileMode(f.Mode&0o777)|modeBits(f.Mode)); err != nil {
				return fmt.Errorf("restore mode of %s: %w", f.Path, err)
			}
		}
	}
	// Times last and deepest first: creating entries changes their parent
	// directory's mtime.
	for i := len(list) - 1; i >= 0; i-- {
		f := list[i]
		if f.Type == files.HardLink {
			continue
		}
		full := filepath.Join(dir, filepath.FromSlash(f.Path))
		ts := []unix.Timespec{unix.NsecToTimespec(f.AtimeNs), unix.NsecToTimespec(f.MtimeNs)}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, full, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("restore times of %s: %w", f.Path, err)
		}
	}
	return nil
}

// modeBits converts setuid, setgid and sticky from Unix bits to os.FileMode.
func modeBits(m uint32) os.FileMode {
	var out os.FileMode
	if m&syscall.S_ISUID != 0 {
		out |= os.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	return out
}

// clearFor removes whatever sits at path so a file or link can be created
// there (a stale entry from a partial earlier attempt, possibly a directory).
func clearFor(path string) error {
	if _, err := os.Lstat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return os.RemoveAll(path)
}
