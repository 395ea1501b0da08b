package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/internal/testutil"
)

// TestToolsRoundTrip writes through the mount with cp, dd, tar and Python
// and reads back byte-identical data, both through the mount and in the
// cache directory where the routing put it.
func TestToolsRoundTrip(t *testing.T) {
	n := NewNode(t, "SCRFS_DATASETS_CACHE_SIZE=8").Start()
	src := t.TempDir()
	writeRandom(t, filepath.Join(src, "tree", "a.bin"), 3<<20+17, 1)
	writeRandom(t, filepath.Join(src, "tree", "sub", "b.bin"), 0, 2)
	writeRandom(t, filepath.Join(src, "tree", "sub", "deep", "c.bin"), 200_001, 3)
	must(t, os.Symlink("a.bin", filepath.Join(src, "tree", "link")))
	want := treeSums(t, filepath.Join(src, "tree"))

	// cp -r into a new dataset directory.
	run(t, "cp", "-r", filepath.Join(src, "tree"), n.Path("ckpt.cp"))
	sameSums(t, "cp -r through the mount", treeSums(t, n.Path("ckpt.cp")), want)
	sameSums(t, "cp -r in the cache", treeSums(t, n.CacheDir("ckpt.cp")), want)

	// tar -x.
	tarball := filepath.Join(src, "t.tar")
	run(t, "tar", "-C", src, "-cf", tarball, "tree")
	must(t, os.Mkdir(n.Path("ckpt.tar"), 0o755))
	run(t, "tar", "-C", n.Path("ckpt.tar"), "-xf", tarball)
	sameSums(t, "tar -x", treeSums(t, n.Path("ckpt.tar", "tree")), want)

	// dd with 1 MiB blocks and fsync.
	must(t, os.Mkdir(n.Path("ckpt.dd"), 0o755))
	run(t, "dd", "if="+filepath.Join(src, "tree", "a.bin"), "of="+n.Path("ckpt.dd", "a.bin"), "bs=1M", "conv=fsync", "status=none")
	if got := fileSum(t, n.Path("ckpt.dd", "a.bin")); got != want["a.bin"] {
		t.Fatal("dd: content differs")
	}

	// Python open()/write()/seek.
	if _, err := exec.LookPath("python3"); err == nil {
		script := `
import os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "state.pt"), "wb") as f:
    f.write(b"x" * 1000)
    f.seek(10)
    f.write(b"PY")
    f.flush(); os.fsync(f.fileno())
with open(os.path.join(d, "state.pt"), "rb") as f:
    data = f.read()
assert len(data) == 1000 and data[10:12] == b"PY", data[:20]
os.truncate(os.path.join(d, "state.pt"), 500)
assert os.path.getsize(os.path.join(d, "state.pt")) == 500
`
		run(t, "python3", "-c", script, n.Path("ckpt.py"))
	}

	st := n.Status()
	if len(st.Datasets) != 4 {
		t.Fatalf("status lists %d datasets, want 4: %+v", len(st.Datasets), st.Datasets)
	}
	if ds := n.Dataset("ckpt.cp"); ds == nil || ds.Files != 3 || ds.Bytes != 3<<20+17+200_001 {
		t.Fatalf("ckpt.cp in status: %+v", ds)
	}
}

// TestLargeFile writes a sparse file beyond 4 GiB with dd and truncate.
func TestLargeFile(t *testing.T) {
	n := NewNode(t).Start()
	must(t, os.Mkdir(n.Path("big"), 0o755))
	p := n.Path("big", "sparse.bin")
	run(t, "dd", "if=/dev/urandom", "of="+p, "bs=1M", "count=2", "seek=5000", "status=none")
	st, err := os.Stat(p)
	if err != nil || st.Size() != 5002<<20 {
		t.Fatalf("size %v, err %v", st.Size(), err)
	}
	if got, want := fileSum(t, p), fileSum(t, n.CacheDir("big", "sparse.bin")); got != want {
		t.Fatal("read through the mount differs from the cache file")
	}
}

func TestFileOutsideDatasetRefused(t *testing.T) {
	n := NewNode(t, "SCRFS_DATASETS_MATCH=^ckpt/(?P<dataset>[^/]+)/").Start()
	must(t, os.Mkdir(n.Path("ckpt"), 0o755))
	err := os.WriteFile(n.Path("ckpt", "stray.txt"), []byte("x"), 0o644)
	if !errors.Is(err, syscall.EPERM) {
		t.Fatalf("file in a directory that is no dataset: %v, want EPERM", err)
	}
	n.WaitLog(10*time.Second, "refused a file outside any dataset", "/ckpt/stray.txt")
}

// TestCompletionRules exercises each rule through a real mount.
func TestCompletionRules(t *testing.T) {
	t.Run("next", func(t *testing.T) {
		n := NewNode(t, "SCRFS_DATASETS_COMPLETE=next").Start()
		writeRandom(t, n.Path("ckpt.1", "r0"), 1000, 1)
		must(t, os.Mkdir(n.Path("ckpt.2"), 0o755))
		n.WaitCompleted(10*time.Second, "ckpt.1")
		expectEROFS(t, n.Path("ckpt.1", "r0"))
	})
	t.Run("marker", func(t *testing.T) {
		n := NewNode(t, "SCRFS_DATASETS_COMPLETE=marker:.metadata").Start()
		writeRandom(t, n.Path("dcp", "__0_0.distcp"), 5000, 1)
		must(t, os.WriteFile(n.Path("dcp", ".metadata"), []byte("meta"), 0o644))
		n.WaitCompleted(10*time.Second, "dcp")
		expectEROFS(t, n.Path("dcp", "__0_0.distcp"))
	})
	t.Run("rename", func(t *testing.T) {
		n := NewNode(t, "SCRFS_DATASETS_COMPLETE=rename").Start()
		writeRandom(t, n.Path("ckpt.tmp", "w"), 100, 1)
		if err := os.Rename(n.Path("ckpt.tmp"), n.Path("ckpt.100")); err != nil {
			t.Fatal(err)
		}
		n.WaitCompleted(10*time.Second, "ckpt.100")
		expectEROFS(t, n.Path("ckpt.100", "w"))
	})
	t.Run("idle", func(t *testing.T) {
		n := NewNode(t, "SCRFS_DATASETS_COMPLETE=idle:300ms").Start()
		writeRandom(t, n.Path("ckpt.1", "w"), 100, 1)
		n.WaitCompleted(10*time.Second, "ckpt.1")
	})
	t.Run("command", func(t *testing.T) {
		n := NewNode(t, "SCRFS_DATASETS_COMPLETE=").Start()
		writeRandom(t, n.Path("ckpt.1", "w"), 100, 1)
		if _, errs, code := n.CLI("complete", "ckpt.1"); code != 0 {
			t.Fatalf("scrfs complete: exit %d: %s", code, errs)
		}
		n.WaitCompleted(10*time.Second, "ckpt.1")
		if ds := n.Dataset("ckpt.1"); ds == nil || ds.State != "complete" {
			t.Fatalf("status after scrfs complete: %+v", ds)
		}
		if _, errs, code := n.CLI("complete", "nope"); code != 6 || !strings.Contains(errs, "nope") {
			t.Fatalf("scrfs complete of a missing dataset: exit %d: %s", code, errs)
		}
	})
	t.Run("waits-for-open-files", func(t *testing.T) {
		n := NewNode(t, "SCRFS_DATASETS_COMPLETE=marker:COMPLETE").Start()
		must(t, os.Mkdir(n.Path("c"), 0o755))
		f, err := os.Create(n.Path("c", "open.bin"))
		if err != nil {
			t.Fatal(err)
		}
		must(t, os.WriteFile(n.Path("c", "COMPLETE"), nil, 0o644))
		n.WaitLog(10*time.Second, "dataset completion requested", "dataset=c")
		if ds := n.Dataset("c"); ds.State != "writing" || ds.OpenWrite != 1 {
			t.Fatalf("with a file open: %+v", ds)
		}
		if _, err := f.Write([]byte("late bytes")); err != nil {
			t.Fatal(err)
		}
		must(t, f.Close())
		n.WaitCompleted(10*time.Second, "c")
		if ds := n.Dataset("c"); ds.Bytes != 10 {
			t.Fatalf("late bytes not counted: %+v", ds)
		}
	})
}

func expectEROFS(t *testing.T, p string) {
	t.Helper()
	err := os.WriteFile(p, []byte("overwrite"), 0o644)
	if !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write to a complete dataset: %v, want EROFS", err)
	}
}

// TestCacheSizeEvicts keeps two completed datasets.
func TestCacheSizeEvicts(t *testing.T) {
	n := NewNode(t, "SCRFS_DATASETS_COMPLETE=next", "SCRFS_DATASETS_CACHE_SIZE=2").Start()
	for i, name := range []string{"c1", "c2", "c3", "c4"} {
		writeRandom(t, n.Path(name, "f"), 4096, uint64(i))
	}
	n.WaitLog(10*time.Second, "dataset evicted", "dataset=c1")
	// The kernel is told to drop its name from another goroutine (the
	// eviction may run inside a request on the same directory): wait.
	testutil.Eventually(t, 5*time.Second, "the evicted dataset to leave the mount", func() bool {
		_, err := os.Stat(n.Path("c1"))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(n.CacheDir("c1")); !os.IsNotExist(err) {
		t.Fatalf("evicted dataset still in cache: %v", err)
	}
	var names []string
	for _, d := range n.Status().Datasets {
		names = append(names, d.Name+"="+d.State)
	}
	if got := strings.Join(names, ","); got != "c2=complete,c3=complete,c4=writing" {
		t.Fatalf("datasets %s", got)
	}
}

// TestCrashRestart kills the daemon with SIGKILL and starts another on the
// same mountpoint: completed datasets are intact and still complete, the
// one being written comes back failed with a reason, and the stale mount is
// replaced.
func TestCrashRestart(t *testing.T) {
	n := NewNode(t, "SCRFS_DATASETS_COMPLETE=marker:COMPLETE").Start()
	writeRandom(t, n.Path("done", "a"), 1<<20, 1)
	writeRandom(t, n.Path("done", "sub", "b"), 12345, 2)
	must(t, os.WriteFile(n.Path("done", "COMPLETE"), nil, 0o644))
	n.WaitCompleted(10*time.Second, "done")
	// Recorded, not only complete here: node 0 killed after its ledger
	// forgot the round and before the record is kept fails the dataset
	// after the restart (a gap left open, in docs/guide.md's known
	// limits).
	n.WaitDataset(10*time.Second, "done", "recorded", func(d *control.Dataset) bool { return d.Seq > 0 })
	want := treeSums(t, n.Path("done"))
	writeRandom(t, n.Path("busy", "partial"), 777, 3)
	f, err := os.Create(n.Path("busy", "open"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("in flight")); err != nil {
		t.Fatal(err)
	}

	n.Kill()
	f.Close() // the application's handle dies with the daemon
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(n.Mount, &sfs); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after SIGKILL the mountpoint should be stale (ENOTCONN), got %v", err)
	}

	n.Start()
	n.WaitLog(10*time.Second, "replaced a stale mount")
	sameSums(t, "completed dataset after crash", treeSums(t, n.Path("done")), want)
	if ds := n.Dataset("done"); ds == nil || ds.State != "complete" || ds.Files != 3 {
		t.Fatalf("completed dataset after restart: %+v", ds)
	}
	// The dataset being written never completed: it comes back failed, with
	// the reason, and out of the cache, never as complete.
	st := n.Status()
	if len(st.Failed) != 1 || st.Failed[0].Name != "busy" || !strings.Contains(st.Failed[0].Reason, "being written") {
		t.Fatalf("dataset being written after restart: failed %+v", st.Failed)
	}
	if n.Dataset("busy") != nil {
		t.Fatal("incomplete dataset still in cache")
	}
	expectEROFS(t, n.Path("done", "a"))
	must(t, os.Mkdir(n.Path("busy"), 0o755))
	if err := os.WriteFile(n.Path("busy", "more"), []byte("ok"), 0o644); err != nil {
		t.Fatalf("a new dataset of the same name cannot be written: %v", err)
	}
}

// TestUnmountWhenBusy: SIGTERM with a file open in the mount unmounts
// lazily and exits cleanly.
func TestUnmountWhenBusy(t *testing.T) {
	n := NewNode(t).Start()
	writeRandom(t, n.Path("c", "f"), 10, 1)
	f, err := os.Open(n.Path("c", "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := n.Stop(); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	n.WaitLog(time.Second, "mountpoint busy; detaching it lazily")
	if mounted(n.Mount) {
		t.Fatal("still mounted after the daemon exited")
	}
}

// TestSecondDaemonRefused: one cache, one daemon.
func TestSecondDaemonRefused(t *testing.T) {
	n := NewNode(t).Start()
	second := NewNode(t)
	second.Env = n.Env
	second.StartNoWait()
	if err := second.WaitExit(30 * time.Second); err == nil {
		t.Fatal("second daemon on the same control directory exited 0")
	}
	second.WaitLog(time.Second, "in use by another scrfs daemon")
}

// TestFusermount3 mounts through fusermount3 as a non-root user would.
func TestFusermount3(t *testing.T) {
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("fusermount3 not found (apt-get install fuse3)")
	}
	n := NewNode(t, "SCRFS_FUSE_MOUNT=fusermount").Start()
	writeRandom(t, n.Path("c", "f"), 1<<20, 9)
	if fileSum(t, n.Path("c", "f")) != fileSum(t, n.CacheDir("c", "f")) {
		t.Fatal("content differs")
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if mounted(n.Mount) {
		t.Fatal("still mounted")
	}
}

func TestBadConfigExitCode(t *testing.T) {
	n := NewNode(t, "SCRFS_DATASETS_CACHE_SIZE=0")
	n.StartNoWait()
	err := n.WaitExit(30 * time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want code 3", err)
	}
	n.WaitLog(time.Second, "datasets.cache_size")
}

func mounted(dir string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}
