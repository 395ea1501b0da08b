package prefix

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/testutil"
)

func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/prefix.") }

// fastDir returns a fresh directory on tmpfs when there is one (the cache
// side is tmpfs in production, and tests stay fast), else t.TempDir().
func fastDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "scrfs-flush-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// writeFile creates path (and parents) with n pseudo-random bytes from seed.
func writeFile(t testing.TB, path string, n int, seed uint64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// node is what treeOf records of one path.
type node struct {
	Type   files.Type
	Mode   uint32
	Mtime  int64
	Size   int64
	SHA256 string
	Target string
}

// treeOf describes every path below root (not root itself), skipping the
// top-level .scrfs directory.
func treeOf(t testing.TB, root string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if rel == ".scrfs" {
			return filepath.SkipDir
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		n := node{Mode: st.Mode & 0o7777, Mtime: st.Mtim.Nano()}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			n.Type, n.Size = files.Regular, st.Size
			n.SHA256 = sha256File(t, p)
		case syscall.S_IFDIR:
			n.Type = files.Dir
		case syscall.S_IFLNK:
			n.Type = files.Symlink
			n.Mode = 0
			n.Target, err = os.Readlink(p)
			if err != nil {
				return err
			}
		default:
			n.Type = 0 // none of the listable types
		}
		out[rel] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sha256File(t testing.TB, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// crcFile is an independent CRC32C of a file: plain hash/crc32 over its
// bytes, none of this package's code.
func crcFile(t testing.TB, p string) uint32 {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return h.Sum32()
}

// leftovers lists paths below root that look like Flush's temporary files.
func leftovers(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), tmpInfix) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// regularFiles lists the regular files and symlinks below root.
func regularFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// testLogger fails the test on any record at Warn or above, unless the test
// expects warnings; it keeps what it saw.
type testLogger struct {
	t       testing.TB
	allowed bool
	mu      sync.Mutex
	records []string
}

func newTestLogger(t testing.TB, allowWarn bool) (*slog.Logger, *testLogger) {
	h := &testLogger{t: t, allowed: allowWarn}
	return slog.New(h), h
}

func (h *testLogger) Enabled(context.Context, slog.Level) bool { return true }
func (h *testLogger) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, b.String())
	h.mu.Unlock()
	if r.Level >= slog.LevelWarn && !h.allowed {
		h.t.Errorf("unexpected log record: %s", b.String())
	}
	return nil
}
func (h *testLogger) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *testLogger) WithGroup(string) slog.Handler      { return h }

func (h *testLogger) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.records, "\n")
}

// buildTree makes a small dataset exercising every kind of entry: nested
// directories, an empty directory, a 0-byte file, odd modes, a setgid
// directory, symlinks (relative, absolute, dangling), fixed mtimes, and a
// file big enough to be split into ranges (unless short).
func buildTree(t testing.TB, root string, short bool) {
	t.Helper()
	big := splitAbove + rangeSize/2 + 12345 // three ranges, the last one partial
	if short {
		big = 3<<20 + 7
	}
	writeFile(t, filepath.Join(root, "rank_0.bin"), 1<<20, 1)
	writeFile(t, filepath.Join(root, "rank_1.bin"), 4096*3+17, 2)
	writeFile(t, filepath.Join(root, "big.bin"), big, 3)
	writeFile(t, filepath.Join(root, "sub/deeper/x.dat"), 100, 4)
	writeFile(t, filepath.Join(root, "sub/y.dat"), 1, 5)
	must(t, os.WriteFile(filepath.Join(root, "empty.bin"), nil, 0o600))
	must(t, os.MkdirAll(filepath.Join(root, "emptydir/inner"), 0o755))
	must(t, os.Symlink("rank_0.bin", filepath.Join(root, "link_rel")))
	must(t, os.Symlink("/nonexistent/target", filepath.Join(root, "sub/link_dangling")))
	must(t, os.Chmod(filepath.Join(root, "rank_1.bin"), 0o400))
	must(t, os.Chmod(filepath.Join(root, "sub/y.dat"), 0o2750))
	must(t, os.Chmod(filepath.Join(root, "emptydir/inner"), 0o500))
	// The application's own directory .scrfs lower down is data, not ours.
	writeFile(t, filepath.Join(root, "sub/.scrfs/keep.me"), 10, 6)
	// scrfs's own metadata, never flushed.
	writeFile(t, filepath.Join(root, ".scrfs/xor.1_of_4"), 1000, 7)

	base := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
	var paths []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		paths = append(paths, p)
		return nil
	})
	// Deepest first, so setting a child's time does not disturb the parent.
	for i := len(paths) - 1; i >= 1; i-- {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(base.Add(time.Duration(i) * time.Second).UnixNano())}
		must(t, unix.UtimesNanoAt(unix.AT_FDCWD, paths[i], ts, unix.AT_SYMLINK_NOFOLLOW))
	}
}

func jsonOf(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// listed returns dir's file list, as completion makes it for a flush.
func listed(t testing.TB, dir string) []files.Meta {
	t.Helper()
	list, err := files.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	return list
}
