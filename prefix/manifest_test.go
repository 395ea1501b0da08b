package prefix

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/atomicfile"
)

func sampleEntries(node int) []Entry {
	r := string(rune('0' + node))
	return []Entry{
		{Meta: files.Meta{Path: "shared", Type: files.Dir, Mode: 0o755, UID: 1000, GID: 100, MtimeNs: 1714564800123456789}, Node: node},
		{Meta: files.Meta{Path: "shared/rank_" + r + ".bin", Type: files.Regular, Size: 5 << 30, CRC32C: 0, HasCRC: true, Mode: 0o644,
			UID: 1000, GID: 100, MtimeNs: -5}, Node: node},
		{Meta: files.Meta{Path: "shared/nocrc_" + r, Type: files.Regular, Size: 10, Mode: 0o4755}, Node: node},
		{Meta: files.Meta{Path: "link_" + r, Type: files.Symlink, Target: "../elsewhere/" + r, MtimeNs: 1}, Node: node},
	}
}

func TestPartRoundTrip(t *testing.T) {
	prefix := fastDir(t)
	in := sampleEntries(3)
	must(t, dirWritePart(prefix, "ckpt.10", 3, in))
	out, err := dirReadPart(prefix, "ckpt.10", 3)
	must(t, err)
	sortEntries(in)
	if !reflect.DeepEqual(in, out) {
		t.Errorf("read back\n%+v\nwrote\n%+v", out, in)
	}
	// One entry a line, CRC as hex, absent CRC absent.
	b, err := os.ReadFile(partPath(prefix, "ckpt.10", 3))
	must(t, err)
	s := string(b)
	if !strings.Contains(s, `"crc32c":"00000000"`) || strings.Count(s, "\n") != len(in)+2 ||
		!strings.HasPrefix(s, `{"version":1,"dataset":"ckpt.10","node":3,`) {
		t.Errorf("part file:\n%s", s)
	}
	if _, err := dirReadPart(prefix, "ckpt.10", 4); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing part: %v", err)
	}
	// A part in the wrong place is caught.
	must(t, os.MkdirAll(manifestDir(prefix, "ckpt.11"), 0o755))
	must(t, os.Link(partPath(prefix, "ckpt.10", 3), partPath(prefix, "ckpt.11", 3)))
	if _, err := dirReadPart(prefix, "ckpt.11", 3); !errors.Is(err, ErrBadMetadata) {
		t.Errorf("misplaced part: %v", err)
	}
}

func TestWritePartRejects(t *testing.T) {
	prefix := fastDir(t)
	for name, tc := range map[string]struct {
		dataset string
		node    int
		es      []Entry
	}{
		"other node":  {"ckpt.1", 0, sampleEntries(1)},
		"bad dataset": {"a/b", 0, nil},
		"meta name":   {".scrfs", 0, nil},
		"escape":      {"ckpt.1", 0, []Entry{{Meta: files.Meta{Path: "../x", Type: files.Regular}}}},
	} {
		if err := dirWritePart(prefix, tc.dataset, tc.node, tc.es); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestPartCrashLeftovers: a part whose writer died mid-write exists only
// as a temporary file. Readers ignore it; the next WritePart of that node
// removes it.
func TestPartCrashLeftovers(t *testing.T) {
	prefix := fastDir(t)
	must(t, os.MkdirAll(manifestDir(prefix, "ckpt.1"), 0o755))
	stale := filepath.Join(filepath.Dir(partPath(prefix, "ckpt.1", 0)), atomicfile.TempPrefix(filepath.Base(partPath(prefix, "ckpt.1", 0)))+"4711")
	must(t, os.WriteFile(stale, []byte(`{"version":1,"dataset":"ckpt.1","node":0,"entr`), 0o644))
	if _, err := dirReadPart(prefix, "ckpt.1", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a half-written part was read: %v", err)
	}
	other := filepath.Join(filepath.Dir(partPath(prefix, "ckpt.1", 1)), atomicfile.TempPrefix(filepath.Base(partPath(prefix, "ckpt.1", 1)))+"1")
	must(t, os.WriteFile(other, nil, 0o644))
	must(t, dirWritePart(prefix, "ckpt.1", 0, nil))
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Error("stale temporary part not removed")
	}
	if _, err := os.Stat(other); err != nil {
		t.Error("node 0 removed node 1's temporary part")
	}
	es, err := dirReadPart(prefix, "ckpt.1", 0)
	must(t, err)
	if len(es) != 0 {
		t.Errorf("empty part read as %v", es)
	}
}

func TestMergeManifest(t *testing.T) {
	prefix := fastDir(t)
	for node := range 3 {
		must(t, dirWritePart(prefix, "ckpt.20", node, sampleEntries(node)))
	}
	m, err := dirMergeManifest(prefix, "ckpt.20", 3)
	must(t, err)
	if m.Files != 6 || m.Bytes != 3*(5<<30+10) || m.Nodes != 3 || len(m.Entries) != 12 {
		t.Errorf("merged: %d files, %d bytes, %d nodes, %d entries", m.Files, m.Bytes, m.Nodes, len(m.Entries))
	}
	back, err := dirReadManifest(prefix, "ckpt.20")
	must(t, err)
	if !m.Created.Equal(back.Created) {
		t.Errorf("created %v, read back %v", m.Created, back.Created)
	}
	back.Created = m.Created
	if !reflect.DeepEqual(m, back) {
		t.Errorf("read back %+v, merged %+v", back, m)
	}
	for node := range 3 {
		want := sampleEntries(node)
		sortEntries(want)
		if got := m.ForNodes([]int{node}); !reflect.DeepEqual(got, want) {
			t.Errorf("ForNode(%d) = %+v", node, got)
		}
	}
	if _, err := dirReadManifest(prefix, "ckpt.21"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing manifest: %v", err)
	}
}

func TestMergeConflicts(t *testing.T) {
	for name, second := range map[string][]Entry{
		"same file":         {{Meta: files.Meta{Path: "shared/rank_0.bin", Type: files.Regular}, Node: 1}},
		"file vs dir":       {{Meta: files.Meta{Path: "shared", Type: files.Regular}, Node: 1}},
		"file below a link": {{Meta: files.Meta{Path: "link_0/x", Type: files.Regular}, Node: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			prefix := fastDir(t)
			must(t, dirWritePart(prefix, "ckpt.1", 0, sampleEntries(0)))
			must(t, dirWritePart(prefix, "ckpt.1", 1, second))
			_, err := dirMergeManifest(prefix, "ckpt.1", 2)
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("got %v, want ErrConflict", err)
			}
			if _, err := os.Stat(manifestPath(prefix, "ckpt.1")); err == nil {
				t.Error("a conflicting merge was written")
			}
			t.Log(err)
		})
	}
}

func TestMergeMissingPart(t *testing.T) {
	prefix := fastDir(t)
	must(t, dirWritePart(prefix, "ckpt.1", 0, nil))
	_, err := dirMergeManifest(prefix, "ckpt.1", 2)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "node.1.json") {
		t.Errorf("got %v", err)
	}
}

// TestCorruptMetadata: truncated or damaged files are errors that name the
// file and wrap ErrBadMetadata, or ErrUnverified where the change broke
// the MAC first — never empty results.
func TestCorruptMetadata(t *testing.T) {
	prefix := fastDir(t)
	must(t, dirWritePart(prefix, "ckpt.1", 0, sampleEntries(0)))
	_, err := dirMergeManifest(prefix, "ckpt.1", 1)
	must(t, err)
	for _, path := range []string{partPath(prefix, "ckpt.1", 0), manifestPath(prefix, "ckpt.1")} {
		good, err := os.ReadFile(path)
		must(t, err)
		for name, bad := range map[string][]byte{
			"empty":      {},
			"truncated":  good[:len(good)/2],
			"no entries": []byte(strings.Replace(string(good), `"entries"`, `"entrees"`, 1)),
			"version 2":  []byte(strings.Replace(string(good), `"version":1`, `"version":2`, 1)),
			"totals":     []byte(strings.Replace(string(good), `"files":2`, `"files":3`, 1)),
			"bad crc":    []byte(strings.Replace(string(good), `"crc32c":"00000000"`, `"crc32c":"0000000g"`, 1)),
		} {
			must(t, os.WriteFile(path, bad, 0o644))
			var err error
			if strings.HasSuffix(path, "manifest.json") {
				_, err = dirReadManifest(prefix, "ckpt.1")
			} else {
				_, err = dirReadPart(prefix, "ckpt.1", 0)
			}
			if !errors.Is(err, ErrBadMetadata) && !errors.Is(err, ErrUnverified) || !strings.Contains(err.Error(), path) {
				t.Errorf("%s %s: got %v", filepath.Base(path), name, err)
			}
		}
	}
}
