package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeRandom writes size pseudo-random bytes (seeded, so reproducible) to
// path with plain POSIX writes, as an application would.
func writeRandom(t *testing.T, path string, size int64, seed uint64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		for i := 0; i < int(n); i += 8 {
			v := r.Uint64()
			for j := 0; j < 8 && i+j < int(n); j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf[:n]); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
		left -= n
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", path, err)
	}
}

// treeSums maps every regular file below root (relative path) to its
// sha256, and symlinks to "-> target".
func treeSums(t *testing.T, root string) map[string]string {
	t.Helper()
	sums, err := sumTree(root)
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// sumTree is treeSums returning its error, for callers outside the test's
// goroutine.
func sumTree(root string) (map[string]string, error) {
	sums := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			sums[rel] = "-> " + target
		case d.Type().IsRegular():
			sum, err := sumFile(p)
			if err != nil {
				return err
			}
			sums[rel] = sum
		}
		return nil
	})
	return sums, err
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	sum, err := sumFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// sumFile returns the sha256 of a file's bytes, hex-encoded.
func sumFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sameSums(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s: sum %.16s, want %.16s", what, k, got[k], v)
		}
	}
}

// run runs a shell tool and fails the test on error, showing its output.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
