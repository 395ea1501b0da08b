package fs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/posixtest"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/testutil"
)

// go-fuse's own goroutines (a server's readers) count only while they run
// this package's code, and every mount test unmounts its server. The
// goroutines of fs/mount, with which these tests mount, are checked too.
// Three kinds of goroutine have no owner that waits, by design, and pass
// only because no test makes them outlive it: a kernel notification of
// this package (forget, appeared: sent from within a FUSE request it
// would deadlock) ends when the kernel answers or the mount goes; in
// fs/mount, the statfs of a hung mount (statfsWithin) cannot be cut short,
// and Unmount of a busy, lazily detached mount stops waiting for its
// server after lazyWait.
func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/fs.", "scrfs/fs/mount.") }

// TestPosix runs go-fuse's conformance tests inside a dataset directory,
// on the daemon data path and with passthrough.
func TestPosix(t *testing.T) {
	skip := map[string]string{
		"FcntlFlockLocksFile": "POSIX locks are not enabled",
		"FcntlFlockSetLk":     "POSIX locks are not enabled",
		"XAttr":               "extended attributes are disabled (DisableXAttrs)",
		"XAttrLarge":          "extended attributes are disabled (DisableXAttrs)",
	}
	for _, pt := range []string{"off", "auto"} {
		t.Run("passthrough="+pt, func(t *testing.T) {
			names := make([]string, 0, len(posixtest.All))
			for name := range posixtest.All {
				names = append(names, name)
			}
			slices.Sort(names)
			for _, name := range names {
				t.Run(name, func(t *testing.T) {
					if why, ok := skip[name]; ok {
						t.Skip(why)
					}
					tm := mountTest(t, mountConfig{passthrough: pt})
					ds := filepath.Join(tm.dir, "ds")
					if err := os.Mkdir(ds, 0o755); err != nil {
						t.Fatal(err)
					}
					posixtest.All[name](t, ds)
				})
			}
		})
	}
}

func TestRoundTripAndCacheLayout(t *testing.T) {
	for _, pt := range []string{"off", "auto"} {
		t.Run("passthrough="+pt, func(t *testing.T) {
			tm := mountTest(t, mountConfig{passthrough: pt})
			if pt == "auto" && !tm.m.Passthrough() {
				t.Log("kernel or privileges do not allow passthrough; testing the daemon path twice")
			}
			data := bytes.Repeat([]byte("scrfs"), 300_000) // 1.5 MB: several 1 MiB writes
			p := filepath.Join(tm.dir, "ckpt.1", "sub", "rank_0.bin")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o640); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes, err %v", len(got), err)
			}
			cached := filepath.Join(tm.store.CacheDir(), "ckpt.1", "sub", "rank_0.bin")
			if got, _ := os.ReadFile(cached); !bytes.Equal(got, data) {
				t.Fatalf("cache file %s holds %d bytes, want the written %d", cached, len(got), len(data))
			}
			// pwrite at an offset inside and beyond the end.
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte("XY"), 10)
			f.WriteAt([]byte("END"), int64(len(data))+100)
			f.Close()
			got, _ = os.ReadFile(p)
			want := slices.Concat(data[:10], []byte("XY"), data[12:], make([]byte, 100), []byte("END"))
			if !bytes.Equal(got, want) {
				t.Fatal("pwrite at offsets: content differs")
			}
		})
	}
}

func TestFileOutsideDatasetIsEPERM(t *testing.T) {
	tm := mountTest(t, mountConfig{match: `^ckpt/(?P<dataset>[^/]+)/`})
	if err := os.Mkdir(filepath.Join(tm.dir, "ckpt"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := os.WriteFile(filepath.Join(tm.dir, "ckpt", "stray.bin"), []byte("x"), 0o600)
	if !errors.Is(err, syscall.EPERM) {
		t.Fatalf("file in a directory that is not a dataset: %v, want EPERM", err)
	}
}

func TestMarkerCompletesAndDatasetTurnsReadOnly(t *testing.T) {
	tm := mountTest(t, mountConfig{rules: cache.Rules{Markers: []string{"COMPLETE"}}})
	ds := filepath.Join(tm.dir, "ckpt.7")
	os.Mkdir(ds, 0o755)
	os.WriteFile(filepath.Join(ds, "rank_0"), []byte("data"), 0o644)
	f, err := os.Create(filepath.Join(ds, "rank_1"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ds, "COMPLETE"), nil, 0o644)
	if st := tm.store.Get("ckpt.7").State(); st != cache.Writing {
		t.Fatalf("state %s while rank_1 is open", st)
	}
	f.Write([]byte("more"))
	f.Close()
	tm.awaitComplete(t, "ckpt.7")

	for what, err := range map[string]error{
		"write":  os.WriteFile(filepath.Join(ds, "rank_0"), []byte("x"), 0o644),
		"create": os.WriteFile(filepath.Join(ds, "new"), []byte("x"), 0o644),
		"unlink": os.Remove(filepath.Join(ds, "rank_0")),
		"chmod":  os.Chmod(filepath.Join(ds, "rank_0"), 0o600),
		"mkdir":  os.Mkdir(filepath.Join(ds, "d"), 0o755),
		"rename": os.Rename(filepath.Join(ds, "rank_0"), filepath.Join(ds, "r0")),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s in a complete dataset: %v, want EROFS", what, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ds, "rank_1")); string(got) != "more" {
		t.Fatalf("read of a complete dataset: %q", got)
	}
	info := tm.store.Get("ckpt.7").Info()
	if info.Files != 3 || info.Bytes != 8 {
		t.Fatalf("complete dataset counted %d files, %d bytes; want 3, 8", info.Files, info.Bytes)
	}
}

func TestRenameRuleAndMetaDirHidden(t *testing.T) {
	tm := mountTest(t, mountConfig{rules: cache.Rules{Rename: true}})
	tmp := filepath.Join(tm.dir, "ckpt.tmp")
	os.Mkdir(tmp, 0o755)
	os.WriteFile(filepath.Join(tmp, "w"), []byte("abc"), 0o644)
	if err := os.Mkdir(filepath.Join(tmp, ".scrfs"), 0o755); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("mkdir .scrfs in a dataset: %v, want EPERM", err)
	}
	if err := os.Rename(tmp, filepath.Join(tm.dir, "ckpt.100")); err != nil {
		t.Fatal(err)
	}
	tm.awaitComplete(t, "ckpt.100")
	os.MkdirAll(filepath.Join(tm.store.CacheDir(), "ckpt.100", ".scrfs"), 0o700)
	entries, err := os.ReadDir(filepath.Join(tm.dir, "ckpt.100"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "w" {
		t.Fatalf("dataset lists %v, want only w", entries)
	}
	if _, err := os.Stat(filepath.Join(tm.dir, "ckpt.100", ".scrfs")); !os.IsNotExist(err) {
		t.Fatalf(".scrfs visible: %v", err)
	}
}

func TestFlatDatasets(t *testing.T) {
	tm := mountTest(t, mountConfig{
		match: `^ckpt/step_(?P<dataset>\d+)_rank_\d+\.bin$`,
		rules: cache.Rules{Next: true},
	})
	dir := filepath.Join(tm.dir, "ckpt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"step_100_rank_0.bin", "step_100_rank_1.bin"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("unmatched file in flat dir: %v, want EPERM", err)
	}
	os.WriteFile(filepath.Join(dir, "step_200_rank_0.bin"), []byte("x"), 0o644)
	tm.awaitComplete(t, "100")
	if _, err := os.Stat(filepath.Join(tm.store.CacheDir(), "100", "step_100_rank_1.bin")); err != nil {
		t.Fatalf("flat file not in its dataset's cache dir: %v", err)
	}
	names := readNames(t, dir)
	want := []string{"step_100_rank_0.bin", "step_100_rank_1.bin", "step_200_rank_0.bin"}
	if !slices.Equal(names, want) {
		t.Fatalf("flat dir lists %v, want %v", names, want)
	}
	if err := os.Remove(filepath.Join(dir, "step_100_rank_0.bin")); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("unlink in complete flat dataset: %v", err)
	}
}

func TestLinksAndSymlinksWithinDataset(t *testing.T) {
	tm := mountTest(t, mountConfig{})
	ds := filepath.Join(tm.dir, "c")
	os.Mkdir(ds, 0o755)
	os.WriteFile(filepath.Join(ds, "a"), []byte("hello"), 0o644)
	if err := os.Link(filepath.Join(ds, "a"), filepath.Join(ds, "b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(ds, "s")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ds, "s")); string(got) != "hello" {
		t.Fatalf("through symlink: %q", got)
	}
	var sa, sb syscall.Stat_t
	syscall.Stat(filepath.Join(ds, "a"), &sa)
	syscall.Stat(filepath.Join(ds, "b"), &sb)
	if sa.Ino != sb.Ino || sa.Nlink != 2 {
		t.Fatalf("hard link: ino %d/%d nlink %d", sa.Ino, sb.Ino, sa.Nlink)
	}
	os.Mkdir(filepath.Join(tm.dir, "d"), 0o755)
	if err := os.Link(filepath.Join(ds, "a"), filepath.Join(tm.dir, "d", "a")); !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("hard link across datasets: %v, want EXDEV", err)
	}
}

func TestLargeSparseFile(t *testing.T) {
	tm := mountTest(t, mountConfig{passthrough: "auto"})
	os.Mkdir(filepath.Join(tm.dir, "big"), 0o755)
	p := filepath.Join(tm.dir, "big", "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	const off = 5 << 30 // beyond 4 GiB
	if _, err := f.WriteAt([]byte("tail"), off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, err := os.Stat(p)
	if err != nil || st.Size() != off+4 {
		t.Fatalf("size %d, err %v", st.Size(), err)
	}
	f, _ = os.Open(p)
	defer f.Close()
	buf := make([]byte, 4)
	if _, err := f.ReadAt(buf, off); err != nil || string(buf) != "tail" {
		t.Fatalf("read beyond 4 GiB: %q %v", buf, err)
	}
}

func TestNamespaceDirsAndRmdir(t *testing.T) {
	tm := mountTest(t, mountConfig{match: `^runs/(?P<dataset>ckpt\.\d+)/`})
	if err := os.MkdirAll(filepath.Join(tm.dir, "runs", "ckpt.1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if tm.store.Get("ckpt.1") == nil {
		t.Fatal("nested dataset not created")
	}
	if err := os.Remove(filepath.Join(tm.dir, "runs")); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of namespace dir holding a dataset: %v", err)
	}
	if err := os.Remove(filepath.Join(tm.dir, "runs", "ckpt.1")); err != nil {
		t.Fatalf("rmdir of an empty writing dataset: %v", err)
	}
	if tm.store.Get("ckpt.1") != nil {
		t.Fatal("removed dataset still in store")
	}
	if err := os.Remove(filepath.Join(tm.dir, "runs")); err != nil {
		t.Fatal(err)
	}
	if got := tm.store.NamespaceDirs(); len(got) != 0 {
		t.Fatalf("namespace dirs left: %v", got)
	}
}

func TestStatfsShowsCacheDevice(t *testing.T) {
	tm := mountTest(t, mountConfig{})
	var mnt, cache syscall.Statfs_t
	if err := syscall.Statfs(tm.dir, &mnt); err != nil {
		t.Fatal(err)
	}
	syscall.Statfs(tm.store.CacheDir(), &cache)
	if mnt.Blocks != cache.Blocks || mnt.Bsize != cache.Bsize {
		t.Fatalf("statfs blocks %d×%d, cache %d×%d", mnt.Blocks, mnt.Bsize, cache.Blocks, cache.Bsize)
	}
}

func TestUtimensAndChmod(t *testing.T) {
	tm := mountTest(t, mountConfig{})
	os.Mkdir(filepath.Join(tm.dir, "c"), 0o755)
	p := filepath.Join(tm.dir, "c", "f")
	os.WriteFile(p, []byte("x"), 0o644)
	mt := time.Date(2020, 1, 2, 3, 4, 5, 600, time.UTC)
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(tm.store.CacheDir(), "c", "f"))
	if !st.ModTime().Equal(mt) || st.Mode().Perm() != 0o600 {
		t.Fatalf("cache file mtime %v mode %v", st.ModTime(), st.Mode())
	}
}

func readNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestWriteOnlyHandleKeepsReadersCoherent: on the daemon data path a
// write-only handle bypasses the page cache; a reader that has the file
// open (and its pages cached) reads what such a handle wrote, and the
// file's size follows the writes.
func TestWriteOnlyHandleKeepsReadersCoherent(t *testing.T) {
	tm := mountTest(t, mountConfig{passthrough: "off"})
	os.Mkdir(filepath.Join(tm.dir, "c"), 0o755)
	p := filepath.Join(tm.dir, "c", "f")
	if err := os.WriteFile(p, bytes.Repeat([]byte("a"), 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 8192)
	if _, err := r.ReadAt(buf, 0); err != nil || buf[0] != 'a' {
		t.Fatalf("first read: %q, %v", buf[:4], err)
	}
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(bytes.Repeat([]byte("b"), 12288), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	buf = make([]byte, 12288)
	if n, err := r.ReadAt(buf, 0); n != len(buf) || !bytes.Equal(buf, bytes.Repeat([]byte("b"), len(buf))) {
		t.Fatalf("read after a write-only handle wrote: %d bytes %q…, %v", n, buf[:4], err)
	}
	if st, err := r.Stat(); err != nil || st.Size() != 12288 {
		t.Fatalf("size after the write: %v, %v", st, err)
	}
}
