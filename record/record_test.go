package record

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/files"
)

// valid is a record of four nodes under xor, one set, node 2 empty.
func valid() *Record {
	r := &Record{Version: Version, Dataset: "ckpt.1", Kind: "dir", Root: "ckpt.1", Seq: 7,
		Completed: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Scheme: Scheme{Kind: "xor", Sets: 1}}
	for i := range 4 {
		m := Member{Node: i, ID: strings.Repeat(string(rune('a'+i)), 32), Set: 0, Rank: i}
		if i == 2 {
			m.Empty = true
		} else {
			m.Files = []files.Meta{{Path: ".", Type: files.Dir, Mode: 0o755},
				{Path: "rank.bin", Type: files.Regular, Size: 10, Mode: 0o644}}
		}
		r.Members = append(r.Members, m)
	}
	return r
}

func TestRoundTripAndQueries(t *testing.T) {
	r := valid()
	dir := t.TempDir()
	if err := Save(dir, r); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Seq != 7 || len(back.Members) != 4 || !back.Completed.Equal(r.Completed) {
		t.Fatalf("read back %+v", back)
	}
	if m := back.Member(r.Members[3].ID); m == nil || m.Node != 3 || m.HeldBy() != m.ID {
		t.Fatalf("member lookup %+v", m)
	}
	if set := back.Set(0); len(set) != 4 || set[1].Node != 1 {
		t.Fatalf("set 0: %+v", set)
	}
	rev := *back
	rev.Rev++
	if !rev.Newer(back) || back.Newer(&rev) {
		t.Fatal("a revision must supersede its record, not the other way round")
	}
	if _, err := Load(t.TempDir()); !IsMissing(err) {
		t.Fatalf("missing record: %v", err)
	}
}

// TestCheckRejects: records read from disk, from a peer or from the prefix
// are refused before anything acts on them.
func TestCheckRejects(t *testing.T) {
	for name, spoil := range map[string]func(r *Record){
		"version":          func(r *Record) { r.Version = 9 },
		"escaping name":    func(r *Record) { r.Dataset, r.Root = "..", ".." },
		"root not name":    func(r *Record) { r.Root = "other" },
		"no sequence":      func(r *Record) { r.Seq = 0 },
		"unknown scheme":   func(r *Record) { r.Scheme.Kind = "raid6" },
		"piece size":       func(r *Record) { r.Scheme.PieceSize = 1 },
		"too few for xor":  func(r *Record) { r.Members = r.Members[:1]; r.Members[0].Rank = 0 },
		"repeated id":      func(r *Record) { r.Members[1].ID = r.Members[0].ID },
		"repeated node":    func(r *Record) { r.Members[1].Node = 0 },
		"set out of range": func(r *Record) { r.Members[3].Set = 1 },
		"rank missing":     func(r *Record) { r.Members[3].Rank = 5 },
		"empty with files": func(r *Record) { r.Members[0].Empty = true },
		"file escapes": func(r *Record) {
			r.Members[0].Files = append(r.Members[0].Files, files.Meta{Path: "../x", Type: files.Regular})
		},
		"file in metadata dir": func(r *Record) {
			r.Members[0].Files = append(r.Members[0].Files, files.Meta{Path: ".scrfs", Type: files.Dir})
		},
	} {
		r := valid()
		spoil(r)
		if err := r.Check(); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: Check() = %v, want ErrBadRecord", name, err)
		}
	}
}

func TestDecodeRejectsUnknownFieldsAndTrailingData(t *testing.T) {
	b, err := valid().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		strings.Replace(string(b), `"version"`, `"surprise": 1, "version"`, 1),
		string(b) + "{}",
		string(b[:len(b)/2]),
	} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrBadRecord) {
			t.Errorf("Decode(%.40q...) = %v", bad, err)
		}
	}
}

func TestLoadRefusesHugeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), File)
	if err := os.WriteFile(p, make([]byte, MaxBytes+2), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(p); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("a file beyond the bound: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	b, _ := valid().Marshal()
	f.Add(b)
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes must be safe to act on: re-checking passes and
		// every query stays in bounds.
		if err := r.Check(); err != nil {
			t.Fatalf("decoded record fails its check: %v", err)
		}
		for s := range r.Scheme.Sets {
			for _, m := range r.Set(s) {
				_ = r.Member(m.ID).HeldBy()
			}
		}
	})
}
