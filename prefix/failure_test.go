package prefix

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/jobdir"
)

// noFinalFiles asserts that no regular file or symlink exists below dir and
// no temporary file was left: a failed Flush leaves nothing under a final
// name (directories may remain; other nodes share them).
func noFinalFiles(t *testing.T, dir string) {
	t.Helper()
	if f := regularFiles(t, dir); len(f) > 0 {
		t.Errorf("files left after a failed flush: %v", f)
	}
}

// smallTmpfs mounts a 1 MiB tmpfs for the test, or skips.
func smallTmpfs(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs for ENOSPC needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1M"); err != nil {
		t.Skipf("cannot mount a 1 MiB tmpfs at %s for ENOSPC (%v)", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func TestFlushENOSPC(t *testing.T) {
	prefix := smallTmpfs(t)
	src := filepath.Join(fastDir(t), "ckpt.10")
	for i := range 4 {
		writeFile(t, filepath.Join(src, "rank_"+string(rune('0'+i))+".bin"), 700<<10, uint64(i))
	}
	_, err := dirFlush(context.Background(), src, filepath.Join(prefix, "ckpt.10"), 0, listed(t, src), Options{CRC: true, Streams: 2})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("got %v, want ENOSPC", err)
	}
	// "flush ckpt.10: write /…/ckpt.10/rank_N.bin: no space left on device"
	msg := err.Error()
	if !strings.HasPrefix(msg, "flush ckpt.10: ") || !strings.Contains(msg, filepath.Join(prefix, "ckpt.10", "rank_")) ||
		!strings.HasSuffix(msg, "no space left on device") || strings.Contains(msg, tmpInfix) {
		t.Errorf("error %q does not name the operation and final path", msg)
	}
	noFinalFiles(t, prefix)
	t.Logf("error: %v", err)
}

// TestFlushBlocked: a regular file where Flush needs a directory, at the
// dataset level and inside it.
func TestFlushBlocked(t *testing.T) {
	src := filepath.Join(fastDir(t), "ckpt.11")
	writeFile(t, filepath.Join(src, "a.bin"), 1000, 1)
	writeFile(t, filepath.Join(src, "sub/b.bin"), 1000, 2)

	prefix := fastDir(t)
	must(t, os.WriteFile(filepath.Join(prefix, "ckpt.11"), []byte("in the way"), 0o644))
	if _, err := dirFlush(context.Background(), src, filepath.Join(prefix, "ckpt.11"), 0, listed(t, src), Options{}); err == nil ||
		!strings.Contains(err.Error(), "not a directory") {
		t.Errorf("dataset dir is a file: got %v", err)
	}

	prefix = fastDir(t)
	must(t, os.MkdirAll(filepath.Join(prefix, "ckpt.11"), 0o755))
	must(t, os.WriteFile(filepath.Join(prefix, "ckpt.11", "sub"), nil, 0o644))
	_, err := dirFlush(context.Background(), src, filepath.Join(prefix, "ckpt.11"), 0, listed(t, src), Options{})
	if !errors.Is(err, jobdir.ErrUnsafe) || !strings.Contains(err.Error(), "refusing "+filepath.Join(prefix, "ckpt.11", "sub")+": it is not a directory") {
		t.Errorf("subdirectory is a file: got %v", err)
	}
	must(t, os.Remove(filepath.Join(prefix, "ckpt.11", "sub")))
	noFinalFiles(t, prefix)
}

// TestFlushCommitFails: the last rename fails (a directory sits at a file's
// final name), so the renames already done are undone.
func TestFlushCommitFails(t *testing.T) {
	src := filepath.Join(fastDir(t), "ckpt.12")
	for _, n := range []string{"a", "b", "c", "z"} {
		writeFile(t, filepath.Join(src, n), 100, 1)
	}
	prefix := fastDir(t)
	must(t, os.MkdirAll(filepath.Join(prefix, "ckpt.12", "z", "occupied"), 0o755))
	_, err := dirFlush(context.Background(), src, filepath.Join(prefix, "ckpt.12"), 0, listed(t, src), Options{})
	if err == nil || !strings.Contains(err.Error(), "rename into "+filepath.Join(prefix, "ckpt.12", "z")) {
		t.Fatalf("got %v", err)
	}
	noFinalFiles(t, prefix)
}

// TestFlushCancel cancels a throttled flush once it has made progress: it
// returns promptly with ctx's error and leaves no file under a final name
// and no temporary file.
func TestFlushCancel(t *testing.T) {
	src := filepath.Join(fastDir(t), "ckpt.14")
	for i := range 8 {
		writeFile(t, filepath.Join(src, string(rune('a'+i))), 1<<20, uint64(i))
	}
	prefix := fastDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := Options{
		CRC:     true,
		Limiter: NewLimiter(1 << 20), // 8 MiB would take ~8 s
		Buffers: NewBuffers(64 << 10),
		Progress: func(done, total int64) {
			if done > 0 {
				cancel()
			}
		},
	}
	start := time.Now()
	_, err := dirFlush(ctx, src, filepath.Join(prefix, "ckpt.14"), 0, listed(t, src), o)
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	// Generous: the point is that it does not run the ~8 s to the end.
	if took > 4*time.Second {
		t.Errorf("cancelled flush took %v", took)
	}
	noFinalFiles(t, prefix)
}

// TestFlushCancelledBeforeStart: a dead context does nothing at all.
func TestFlushCancelledBeforeStart(t *testing.T) {
	src := filepath.Join(fastDir(t), "ckpt.15")
	writeFile(t, filepath.Join(src, "a"), 100, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	prefix := fastDir(t)
	if _, err := dirFlush(ctx, src, filepath.Join(prefix, "ckpt.15"), 0, listed(t, src), Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(prefix, "ckpt.15")); err == nil {
		t.Error("a cancelled flush created the dataset directory")
	}
}

func TestFlushMissingSource(t *testing.T) {
	_, err := dirFlush(context.Background(), filepath.Join(fastDir(t), "nope"), filepath.Join(fastDir(t), "nope"), 0, nil, Options{})
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "stat ") {
		t.Errorf("got %v", err)
	}
}

// TestFlushChangedSinceListed: Flush copies the list it is given, not what
// the directory holds now; a file whose size is no longer the listed one
// fails it, and nothing appears under a final name.
func TestFlushChangedSinceListed(t *testing.T) {
	src := filepath.Join(fastDir(t), "ckpt.16")
	writeFile(t, filepath.Join(src, "a.bin"), 1000, 1)
	writeFile(t, filepath.Join(src, "b.bin"), 1000, 2)
	list := listed(t, src)
	must(t, os.Truncate(filepath.Join(src, "b.bin"), 10))
	prefix := fastDir(t)
	_, err := dirFlush(context.Background(), src, filepath.Join(prefix, "ckpt.16"), 0, list, Options{CRC: true})
	if err == nil || !strings.Contains(err.Error(), "changed during flush") || !strings.Contains(err.Error(), "b.bin") {
		t.Fatalf("got %v", err)
	}
	noFinalFiles(t, prefix)
}
