package files

import (
	"fmt"
)

// Type is the kind of a dataset entry.
type Type uint8

// Entry types. Only Regular entries carry data.
const (
	Regular  Type = iota + 1
	Dir           // directory (recorded so empty directories survive)
	Symlink       // symbolic link; Target is the link text
	HardLink      // a later path of an inode seen earlier; Target is that earlier path
)

// String returns the JSON name of t.
func (t Type) String() string {
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

// MarshalText implements encoding.TextMarshaler so lists stay readable.
func (t Type) MarshalText() ([]byte, error) {
	if t < Regular || t > HardLink {
		return nil, fmt.Errorf("invalid entry type %d", uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *Type) UnmarshalText(b []byte) error {
	for c := Regular; c <= HardLink; c++ {
		if string(b) == c.String() {
			*t = c
			return nil
		}
	}
	return fmt.Errorf("unknown entry type %q", b)
}

// Meta describes one entry of a member's dataset. Regular files carry
// data; directories, symlinks and hard links (a later path with the same
// inode as an earlier one) carry metadata only. Its JSON is part of the
// redundancy file's header and of the dataset record
// (docs/formats-redundancy.md, docs/formats.md).
type Meta struct {
	// Path is relative to the dataset directory, '/'-separated, clean, never
	// absolute, never "..", never inside layout.MetaDir (CheckPath); "."
	// only for a list's first entry, the dataset directory itself.
	Path string `json:"path"`
	Type Type   `json:"type"`
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
	// Partial marks a regular file of which the member holds only Ranges
	// (ranges.go): other nodes wrote the rest. Its bytes, and so its
	// CRC32C, are those of its copy: zeros outside the ranges.
	Partial bool    `json:"partial,omitempty"`
	Ranges  []Range `json:"ranges,omitempty"`
}

// Bytes returns the bytes the regular files of list hold: the data a
// member holds (hard links add none, a Partial file its ranges).
func Bytes(list []Meta) int64 {
	var n int64
	for i := range list {
		if list[i].Type == Regular {
			n += list[i].HeldBytes()
		}
	}
	return n
}
