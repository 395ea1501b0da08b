package schemes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/scrfs/scrfs/layout"
)

// EntryType is the kind of a dataset entry.
type EntryType uint8

// Entry types. Only Regular entries carry data in the logical file.
const (
	Regular  EntryType = iota + 1
	Dir                // directory (recorded so empty directories survive)
	Symlink            // symbolic link; Target is the link text
	HardLink           // a later path of an inode seen earlier; Target is that earlier path
)

// String returns the JSON name of t.
func (t EntryType) String() string {
	switch t {
	case Regular:
		return "file"
	case Dir:
		return "dir"
	case Symlink:
		return "symlink"
	case HardLink:
		return "hardlink"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// MarshalText implements encoding.TextMarshaler so headers stay readable.
func (t EntryType) MarshalText() ([]byte, error) {
	if t < Regular || t > HardLink {
		return nil, fmt.Errorf("invalid entry type %d", uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *EntryType) UnmarshalText(b []byte) error {
	for c := Regular; c <= HardLink; c++ {
		if string(b) == c.String() {
			*t = c
			return nil
		}
	}
	return fmt.Errorf("unknown entry type %q", b)
}

// FileMeta describes one entry of a member's dataset. Regular files carry
// data; directories, symlinks and hard links (a later path with the same inode
// as an earlier one) carry metadata only.
type FileMeta struct {
	// Path is relative to the dataset directory, '/'-separated, clean, never
	// absolute, never "..", never inside layout.MetaDir.
	Path string    `json:"path"`
	Type EntryType `json:"type"`
	// Size is the byte count of a regular file (and of a hard link's inode).
	Size int64 `json:"size"`
	// Mode holds the permission bits plus setuid, setgid and sticky (07777).
	Mode    uint32 `json:"mode"`
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
	MtimeNs int64  `json:"mtime_ns"`
	AtimeNs int64  `json:"atime_ns"`
	Target  string `json:"target,omitempty"`
	HasCRC  bool   `json:"has_crc,omitempty"`
	CRC32C  uint32 `json:"crc32c,omitempty"` // of a regular file's bytes, when HasCRC
}

// ScanDir lists the dataset under dir in a deterministic, lexical walk
// (directories before their contents), skipping dir/.scrfs. The first entry
// is the root itself, path ".", so a rebuild restores the dataset
// directory's own mode, owner and times. Devices, FIFOs and sockets are an error: checkpoints do not
// contain them and they cannot be restored faithfully. CRCs are not computed
// (HasCRC is false); Encode fills them while it reads the files anyway.
func ScanDir(dir string) ([]FileMeta, error) {
	var out []FileMeta
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

// statMeta builds the FileMeta of the entry at full path p named rel, and
// for regular files with several links the (device, inode) key that finds
// their other paths.
func statMeta(p, rel string) (m FileMeta, key [2]uint64, err error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return FileMeta{}, key, fmt.Errorf("scan %s: %w", p, &os.PathError{Op: "lstat", Path: p, Err: err})
	}
	m = FileMeta{
		Path:    rel,
		Mode:    st.Mode & 0o7777,
		UID:     st.Uid,
		GID:     st.Gid,
		MtimeNs: st.Mtim.Nano(),
		AtimeNs: st.Atim.Nano(),
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		m.Type = Regular
		m.Size = st.Size
		if st.Nlink > 1 {
			key = [2]uint64{uint64(st.Dev), st.Ino}
		}
	case syscall.S_IFDIR:
		m.Type = Dir
	case syscall.S_IFLNK:
		m.Type = Symlink
		t, err := os.Readlink(p)
		if err != nil {
			return FileMeta{}, key, fmt.Errorf("scan %s: %w", p, err)
		}
		m.Target = t
	default:
		return FileMeta{}, key, fmt.Errorf("scan %s: unsupported file type %#o", p, st.Mode&syscall.S_IFMT)
	}
	return m, key, nil
}

// logicalSize returns the byte count of the logical file of files.
func logicalSize(files []FileMeta) int64 {
	var n int64
	for _, f := range files {
		if f.Type == Regular {
			n += f.Size
		}
	}
	return n
}

// CheckRelPath reports whether p may name an entry of a dataset: a clean
// relative path that stays inside it and out of its metadata directory.
// Headers and peers are untrusted input, and nothing may write or read
// outside the dataset's directory.
func CheckRelPath(p string) error {
	switch {
	case p == "" || p == ".":
		return errors.New("empty path")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("absolute path %q", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path %q contains NUL", p)
	case path.Clean(p) != p:
		return fmt.Errorf("path %q is not clean", p)
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("path %q leaves the dataset", p)
	case p == layout.MetaDir || strings.HasPrefix(p, layout.MetaDir+"/"):
		return fmt.Errorf("path %q is inside %s", p, layout.MetaDir)
	}
	return nil
}

// CheckFiles validates a member's file list from an untrusted source (a
// header, a peer, a dataset record): paths unique and local, types known,
// sizes sane, hard links pointing to an earlier regular file of the same
// size, parents listed before children.
func CheckFiles(files []FileMeta) error {
	index := make(map[string]EntryType, len(files))
	regSize := make(map[string]int64)
	var total int64
	for i, f := range files {
		if i == 0 && f.Path == "." && f.Type == Dir {
			// The dataset directory itself, for its mode, owner and times.
			index[f.Path] = Dir
			continue
		}
		if err := CheckRelPath(f.Path); err != nil {
			return fmt.Errorf("file %d: %w", i, err)
		}
		if _, dup := index[f.Path]; dup {
			return fmt.Errorf("file %d: duplicate path %q", i, f.Path)
		}
		if parent := path.Dir(f.Path); parent != "." {
			if index[parent] != Dir {
				return fmt.Errorf("file %d: parent of %q not listed before it as a directory", i, f.Path)
			}
		}
		if f.Size < 0 || f.Mode&^0o7777 != 0 {
			return fmt.Errorf("file %d (%q): bad size %d or mode %#o", i, f.Path, f.Size, f.Mode)
		}
		switch f.Type {
		case Regular:
			regSize[f.Path] = f.Size
			// Bounded so sums and offsets never overflow.
			if f.Size > maxDataLen-total {
				return fmt.Errorf("file %d (%q): data beyond %d bytes", i, f.Path, int64(maxDataLen))
			}
			total += f.Size
		case Dir:
			if f.Size != 0 {
				return fmt.Errorf("file %d (%q): directory with size %d", i, f.Path, f.Size)
			}
		case Symlink:
			if f.Target == "" || strings.ContainsRune(f.Target, 0) {
				return fmt.Errorf("file %d (%q): bad symlink target", i, f.Path)
			}
		case HardLink:
			sz, ok := regSize[f.Target]
			if !ok || sz != f.Size {
				return fmt.Errorf("file %d (%q): hard link to %q, not an earlier regular file of size %d", i, f.Path, f.Target, f.Size)
			}
		default:
			return fmt.Errorf("file %d (%q): unknown type %d", i, f.Path, uint8(f.Type))
		}
		index[f.Path] = f.Type
	}
	return nil
}
