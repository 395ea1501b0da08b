package prefix

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/scrfs/scrfs/files"
)

// Entry is one file, directory or symbolic link of a dataset as one node
// flushed it: its entry in the dataset's file list, and the node. It is a
// plain value: callers may copy and keep it.
//
// A manifest holds less than a file list can (docs/formats-prefix.md): its
// Type is files.Regular, files.Dir or files.Symlink (a prefix holds plain
// files: a hard link is flushed as a file of its own), a symlink's Mode is
// 0, AtimeNs is not recorded, and HasCRC is set only when the flush
// computed CRCs (a flush with Options.CRC off records none).
type Entry struct {
	files.Meta
	// Node is the index of the node that flushed the entry.
	Node int
	// Blocks are the CRC32Cs of a regular file's BlockSize blocks, when
	// the flush computed CRCs and the file has more than one block; nil
	// otherwise (and in manifests written before blocks were recorded).
	Blocks []uint32
}

// maxPath bounds an entry path (Linux PATH_MAX), so a corrupt manifest cannot
// make Fetch build absurd names.
const maxPath = 4096

// checkPath reports whether p is an acceptable Entry.Path: a dataset path
// (files.CheckPath) that the prefix's file system can hold.
func checkPath(p string) error {
	if err := files.CheckPath(p); err != nil {
		return err
	}
	if len(p) >= maxPath {
		return fmt.Errorf("path %.40q... longer than %d bytes", p, maxPath-1)
	}
	for c := range strings.SplitSeq(p, "/") {
		if len(c) > 255 {
			return fmt.Errorf("path %q has a component longer than 255 bytes", p)
		}
	}
	return nil
}

// entriesOf returns node's manifest entries of list, a member's file
// list, sorted by path: the dataset directory itself (".") left out (the
// prefix's directory of the dataset is shared by every node), the rest as
// Entry describes. Lists come from the job's records: checked again here,
// as a manifest's entries must be.
func entriesOf(list []files.Meta, node int) ([]Entry, error) {
	es := make([]Entry, 0, len(list))
	for _, m := range list {
		if m.Path == "." && m.Type == files.Dir {
			continue
		}
		e := Entry{Meta: m, Node: node}
		e.AtimeNs, e.HasCRC, e.CRC32C = 0, false, 0
		switch e.Type {
		case files.HardLink:
			e.Type, e.Target = files.Regular, ""
		case files.Symlink:
			e.Mode = 0 // meaningless for links on Linux
		}
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadEntry, err)
		}
		es = append(es, e)
	}
	sortEntries(es)
	return es, nil
}

// check validates one entry on its own.
func (e *Entry) check() error {
	if err := checkPath(e.Path); err != nil {
		return err
	}
	if e.Node < 0 {
		return fmt.Errorf("%s: negative node %d", e.Path, e.Node)
	}
	if err := e.checkBlocks(); err != nil {
		return err
	}
	if e.Mode&^07777 != 0 {
		return fmt.Errorf("%s: mode %#o has bits beyond 07777", e.Path, e.Mode)
	}
	switch e.Type {
	case files.Regular:
		if e.Size < 0 {
			return fmt.Errorf("%s: negative size %d", e.Path, e.Size)
		}
		if e.Target != "" {
			return fmt.Errorf("%s: a regular file has no link target", e.Path)
		}
	case files.Dir, files.Symlink:
		if e.Size != 0 || e.HasCRC {
			return fmt.Errorf("%s: a %s has no size or CRC", e.Path, e.Type)
		}
		if e.Type == files.Dir && e.Target != "" {
			return fmt.Errorf("%s: a directory has no link target", e.Path)
		}
		if e.Type == files.Symlink && (e.Target == "" || len(e.Target) >= maxPath || strings.IndexByte(e.Target, 0) >= 0) {
			return fmt.Errorf("%s: symlink target %.40q is empty, too long or contains NUL", e.Path, e.Target)
		}
	default:
		return fmt.Errorf("%s: unknown type %q", e.Path, e.Type)
	}
	return nil
}

// checkEntries validates a set of entries as a whole: each entry, no path
// listed twice except a directory (several nodes create the same
// directories), and no entry below a non-directory. The last rule is what
// keeps Fetch inside its destination: a manifest listing symlink "a" -> "/"
// and file "a/etc/passwd" is rejected here.
func checkEntries(es []Entry) error {
	kind := make(map[string]files.Type, len(es))
	for i := range es {
		e := &es[i]
		if err := e.check(); err != nil {
			return err
		}
		if prev, ok := kind[e.Path]; ok && (prev != files.Dir || e.Type != files.Dir) {
			return fmt.Errorf("%s listed twice (%s and %s)", e.Path, prev, e.Type)
		}
		kind[e.Path] = e.Type
	}
	for p := range kind {
		for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
			if t, ok := kind[p[:i]]; ok && t != files.Dir {
				return fmt.Errorf("%s lies below %s, which is a %s", p, p[:i], t)
			}
		}
	}
	return nil
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// sortEntries orders entries by path, then node: the order of every list
// scrfs writes, so files diff cleanly.
func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].Path != es[j].Path {
			return es[i].Path < es[j].Path
		}
		return es[i].Node < es[j].Node
	})
}

// wireEntry is Entry as JSON; see docs/formats-prefix.md. The CRC is a hex
// string (the form checksum tools print) and absent when not computed; the
// access time is not recorded.
type wireEntry struct {
	Path    string     `json:"path"`
	Type    files.Type `json:"type"`
	Size    int64      `json:"size"`
	CRC32C  string     `json:"crc32c,omitempty"`
	Mode    uint32     `json:"mode"`
	UID     uint32     `json:"uid"`
	GID     uint32     `json:"gid"`
	MtimeNs int64      `json:"mtime_ns"`
	Target  string     `json:"target,omitempty"`
	Node    int        `json:"node"`
	Blocks  []string   `json:"blocks,omitempty"`
}

// MarshalJSON encodes e in the manifest format.
func (e Entry) MarshalJSON() ([]byte, error) {
	w := wireEntry{Path: e.Path, Type: e.Type, Size: e.Size, Mode: e.Mode, UID: e.UID, GID: e.GID,
		MtimeNs: e.MtimeNs, Target: e.Target, Node: e.Node}
	if e.HasCRC {
		w.CRC32C = hexCRC(e.CRC32C)
	}
	for _, b := range e.Blocks {
		w.Blocks = append(w.Blocks, hexCRC(b))
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes the manifest format. It checks the CRC's syntax only;
// the decoders of whole files call check.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var w wireEntry
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Entry{Meta: files.Meta{Path: w.Path, Type: w.Type, Size: w.Size, Mode: w.Mode, UID: w.UID, GID: w.GID,
		MtimeNs: w.MtimeNs, Target: w.Target}, Node: w.Node}
	if w.CRC32C != "" {
		v, err := parseCRC(w.Path, "crc32c", w.CRC32C)
		if err != nil {
			return err
		}
		e.CRC32C, e.HasCRC = v, true
	}
	if len(w.Blocks) > 0 {
		e.Blocks = make([]uint32, len(w.Blocks))
		for i, h := range w.Blocks {
			v, err := parseCRC(w.Path, fmt.Sprintf("block %d's crc32c", i), h)
			if err != nil {
				return err
			}
			e.Blocks[i] = v
		}
	}
	return nil
}

// hexCRC is a CRC32C as the manifest writes it: 8 hex digits.
func hexCRC(c uint32) string { return fmt.Sprintf("%08x", c) }

// parseCRC reads a CRC32C the manifest wrote (hexCRC); what names it in
// the error.
func parseCRC(path, what, h string) (uint32, error) {
	v, err := strconv.ParseUint(h, 16, 32)
	if len(h) != 8 || err != nil {
		return 0, fmt.Errorf("%s: %s %q is not 8 hex digits", path, what, h)
	}
	return uint32(v), nil
}
