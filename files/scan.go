package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/scrfs/scrfs/layout"
)

// ErrUnsupportedType: a dataset holds something other than regular files,
// directories and symbolic links (a FIFO, socket or device).
var ErrUnsupportedType = errors.New("unsupported file type")

// Scan lists the dataset under dir in a deterministic, lexical walk
// (directories before their contents), skipping dir/.scrfs. The first entry
// is the root itself, path ".", so a rebuild restores the dataset
// directory's own mode, owner and times. A later path of an inode listed
// before is a HardLink to it. Devices, FIFOs and sockets are an error
// wrapping ErrUnsupportedType: checkpoints do not contain them and they
// cannot be restored faithfully. CRCs are not computed (HasCRC is false):
// whoever reads the files next takes them.
func Scan(dir string) ([]Meta, error) {
	var out []Meta
	seen := make(map[[2]uint64]string)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("scan %s: %w", p, err)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return fmt.Errorf("scan %s: %w", p, err)
		}
		rel = filepath.ToSlash(rel)
		if rel == layout.MetaDir {
			return filepath.SkipDir
		}
		m, key, err := statMeta(p, rel)
		if err != nil {
			return err
		}
		if m.Type == Regular && key != [2]uint64{} {
			if first, ok := seen[key]; ok {
				m.Type = HardLink
				m.Target = first
			} else {
				seen[key] = rel
			}
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// statMeta builds the Meta of the entry at full path p named rel, and for
// regular files with several links the (device, inode) key that finds
// their other paths.
func statMeta(p, rel string) (m Meta, key [2]uint64, err error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return Meta{}, key, fmt.Errorf("scan %s: %w", p, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Meta{}, key, fmt.Errorf("scan %s: no Unix attributes", p)
	}
	m = Meta{
		Path:    rel,
		Mode:    st.Mode & 0o7777,
		UID:     st.Uid,
		GID:     st.Gid,
		MtimeNs: st.Mtim.Nano(),
		AtimeNs: st.Atim.Nano(),
	}
	switch mode := fi.Mode(); {
	case mode.IsRegular():
		m.Type = Regular
		m.Size = st.Size
		if st.Nlink > 1 {
			key = [2]uint64{uint64(st.Dev), st.Ino}
		}
	case mode.IsDir():
		m.Type = Dir
	case mode&fs.ModeSymlink != 0:
		m.Type = Symlink
		t, err := os.Readlink(p)
		if err != nil {
			return Meta{}, key, fmt.Errorf("scan %s: %w", p, err)
		}
		m.Target = t
	default:
		return Meta{}, key, fmt.Errorf("scan %s: %w: %s", p, ErrUnsupportedType, ModeName(mode))
	}
	return m, key, nil
}

// ModeName names the file type of mode for messages: "file",
// "directory", "symbolic link", "FIFO", "socket", "device".
func ModeName(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "file"
	case mode.IsDir():
		return "directory"
	case mode&fs.ModeSymlink != 0:
		return "symbolic link"
	case mode&fs.ModeNamedPipe != 0:
		return "FIFO"
	case mode&fs.ModeSocket != 0:
		return "socket"
	case mode&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// Missing checks that every entry of list is in dir with its listed type
// and size (contents are not read) and returns those missing or changed,
// one line each: a member whose redundancy file is gone may still hold its
// data, and one whose files changed cannot serve them.
func Missing(dir string, list []Meta) []string {
	var bad []string
	for _, f := range list {
		full := filepath.Join(dir, filepath.FromSlash(f.Path))
		fi, err := os.Lstat(full)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", f.Path, errors.Unwrap(err)))
			continue
		}
		switch f.Type {
		case Regular, HardLink:
			if !fi.Mode().IsRegular() || fi.Size() != f.Size {
				bad = append(bad, fmt.Sprintf("%s: %v of %d bytes, recorded a file of %d", f.Path, fi.Mode().Type(), fi.Size(), f.Size))
				continue
			}
			if f.Type == HardLink {
				ti, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f.Target)))
				if err != nil || !os.SameFile(fi, ti) {
					bad = append(bad, fmt.Sprintf("%s: no longer a hard link of %s", f.Path, f.Target))
				}
			}
		case Dir:
			if !fi.IsDir() {
				bad = append(bad, fmt.Sprintf("%s: not a directory", f.Path))
			}
		case Symlink:
			t, err := os.Readlink(full)
			if err != nil || t != f.Target {
				bad = append(bad, fmt.Sprintf("%s: not a symlink to %q", f.Path, f.Target))
			}
		}
	}
	return bad
}
