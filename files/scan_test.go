package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/scrfs/scrfs/layout"
)

func TestScan(t *testing.T) {
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
	list, err := Scan(dir)
	must(err)
	// WalkDir order: per-directory lexical, directories before contents.
	want := []struct {
		path   string
		typ    Type
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
	if len(list) != len(want) {
		t.Fatalf("got %d entries: %+v", len(list), list)
	}
	for i, w := range want {
		f := list[i]
		if f.Path != w.path || f.Type != w.typ || f.Size != w.size || f.Target != w.target || f.Mode != w.mode {
			t.Errorf("entry %d: %+v, want %+v", i, f, w)
		}
	}
	if Bytes(list) != 7 {
		t.Errorf("%d bytes, want 7 (hard links carry no data)", Bytes(list))
	}
	if err := Check(list); err != nil {
		t.Errorf("Scan's output fails its own checks: %v", err)
	}
	if bad := Missing(dir, list); len(bad) != 0 {
		t.Errorf("Missing in the scanned directory: %q", bad)
	}
	must(os.Truncate(filepath.Join(dir, "a.txt"), 4))
	must(os.Remove(filepath.Join(dir, "s")))
	if bad := Missing(dir, list); len(bad) != 3 || !strings.HasPrefix(bad[0], "a.txt:") {
		t.Errorf("Missing after a truncate and a removal: %q, want a.txt, s and z", bad)
	}

	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	if _, err := Scan(dir); !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("FIFO: %v, want ErrUnsupportedType naming it", err)
	}
	if _, err := Scan(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing dir: %v", err)
	}
}
