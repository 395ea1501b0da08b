package files

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/scrfs/scrfs/layout"
)

// MaxBytes bounds the bytes of one list's regular files together, so that
// sums and offsets over them (a member's logical file) never overflow an
// int64.
const MaxBytes = 1 << 60

// CheckPath reports whether p may name an entry of a dataset: a clean
// relative path that stays inside it and out of its metadata directory.
// Lists come from peers, headers and records, which are untrusted, and
// nothing may write or read outside the dataset's directory.
func CheckPath(p string) error {
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

// Check validates a member's file list from an untrusted source (a
// header, a peer, a dataset record): paths unique and local, types known,
// sizes sane and together at most MaxBytes, hard links pointing to an
// earlier regular file of the same size, parents listed before children.
// A first entry "." of type Dir is the dataset directory itself.
func Check(list []Meta) error {
	index := make(map[string]Type, len(list))
	regSize := make(map[string]int64)
	var total int64
	for i, f := range list {
		if i == 0 && f.Path == "." && f.Type == Dir {
			// The dataset directory itself, for its mode, owner and times.
			index[f.Path] = Dir
			continue
		}
		if err := CheckPath(f.Path); err != nil {
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
		if (f.Partial || len(f.Ranges) > 0) && (f.Type != Regular || !f.Partial) {
			return fmt.Errorf("file %d (%q): ranges of a %v that is not a partial file", i, f.Path, f.Type)
		}
		switch f.Type {
		case Regular:
			regSize[f.Path] = f.Size
			// Bounded so sums and offsets never overflow.
			if f.Size > MaxBytes-total {
				return fmt.Errorf("file %d (%q): data beyond %d bytes", i, f.Path, int64(MaxBytes))
			}
			total += f.Size
			if err := checkRanges(&f); err != nil {
				return fmt.Errorf("file %d (%q): %w", i, f.Path, err)
			}
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
