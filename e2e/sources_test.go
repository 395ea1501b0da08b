package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonSources makes go test's result cache depend on every source
// file of the daemon these tests build and run. The test binary imports few
// of them, so a cached pass of an older daemon would be reported for a
// changed one; go test runs a package again when a file its tests stat'ed
// has changed since.
func TestDaemonSources(t *testing.T) {
	n := 0
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != ".." && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case strings.HasSuffix(p, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum":
			if _, err := os.Stat(p); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no source files found above e2e/")
	}
}
