package schemes

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/scrfs/scrfs/layout"
)

func TestScanDir(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "a", "b"), 0o750))
	must(os.MkdirAll(filepath.Join(dir, layout.MetaDir), 0o700))
	must(os.WriteFile(filepath.Join(dir, layout.MetaDir, "x.redset"), []byte("skip me"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "a.txt"), []byte("12345"), 0o640))
	must(os.WriteFile(filepath.Join(dir, "a", "b", "f"), []byte("xy"), 0o600))
	must(os.Link(filepath.Join(dir, "a.txt"), filepath.Join(dir, "z")))
	must(os.Symlink("a.txt", filepath.Join(dir, "s")))
	files, err := ScanDir(dir)
	must(err)
	// WalkDir order: per-directory lexical, directories before contents.
	want := []struct {
		path   string
		typ    EntryType
		size   int64
		target string
		mode   uint32
	}{
		{".", Dir, 0, "", 0o755},
		{"a", Dir, 0, "", 0o750},
		{"a/b", Dir, 0, "", 0o750},
		{"a/b/f", Regular, 2, "", 0o600},
		{"a.txt", Regular, 5, "", 0o640},
		{"s", Symlink, 0, "a.txt", 0o777},
		{"z", HardLink, 5, "a.txt", 0o640},
	}
	if len(files) != len(want) {
		t.Fatalf("got %d entries: %+v", len(files), files)
	}
	for i, w := range want {
		f := files[i]
		if f.Path != w.path || f.Type != w.typ || f.Size != w.size || f.Target != w.target || f.Mode != w.mode {
			t.Errorf("entry %d: %+v, want %+v", i, f, w)
		}
	}
	if logicalSize(files) != 7 {
		t.Errorf("logical size %d, want 7 (hard links carry no data)", logicalSize(files))
	}
	if err := CheckFiles(files); err != nil {
		t.Errorf("ScanDir output fails its own checks: %v", err)
	}

	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	if _, err := ScanDir(dir); err == nil {
		t.Error("FIFO accepted")
	}
	if _, err := ScanDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing dir: %v", err)
	}
}

func TestParams(t *testing.T) {
	valid := []Params{
		{Kind: Single, Size: 1},
		{Kind: Partner, Size: 2, Replicas: 1},
		{Kind: Partner, Size: 8, Replicas: 7},
		{Kind: XOR, Size: 2},
		{Kind: RS, Size: 2, Parity: 1},
		{Kind: RS, Size: 200, Parity: 56},
		{Kind: XOR, Size: 8, PieceSize: MinPieceSize},
	}
	for _, p := range valid {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	invalid := []Params{
		{Kind: Single, Size: 0},
		{Kind: Partner, Size: 3, Replicas: 0},
		{Kind: Partner, Size: 3, Replicas: 3},
		{Kind: XOR, Size: 1},
		{Kind: RS, Size: 4, Parity: 4},
		{Kind: RS, Size: 200, Parity: 57},
		{Kind: XOR, Size: 4, PieceSize: MinPieceSize - 1},
		{Kind: 9, Size: 4},
	}
	for _, p := range invalid {
		if err := p.Validate(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%+v: %v, want ErrInvalidParams", p, err)
		}
	}
	tol := map[Kind]int{Single: 0, Partner: 3, XOR: 1, RS: 2}
	for k, want := range tol {
		p := Params{Kind: k, Size: 6, Replicas: 3, Parity: 2}
		if got := p.Tolerance(); got != want {
			t.Errorf("%s tolerance %d, want %d", k, got, want)
		}
		back, err := ParseKind(k.String())
		if err != nil || back != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), back, err)
		}
	}
	if _, err := ParseKind("raid6"); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("ParseKind accepted raid6: %v", err)
	}
	m := Member{Rank: 3, Set: SetInfo{Group: 1, Groups: 4, Nodes: []int{9, 8, 7, 6}}}
	if got := fileName(RS, m.Set, m.Rank); got != "6.rs.grp_2_of_4.mem_4_of_4.redset" {
		t.Errorf("file name %q", got)
	}
}
