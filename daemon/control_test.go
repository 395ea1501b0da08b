package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/config"
	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/internal/testutil"
)

func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/daemon.") }

// loopExt4 mounts a small ext4 file system with 1 KiB blocks (a directory
// block then holds a few dozen entries) and returns it; it skips where
// that needs what the machine lacks (root, mkfs.ext4, loop devices).
func loopExt4(t *testing.T) string {
	t.Helper()
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skip("mkfs.ext4 not found (apt-get install e2fsprogs)")
	}
	tmp := t.TempDir()
	img, mnt := filepath.Join(tmp, "fs.img"), filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("truncate", "-s", "4M", img).CombinedOutput(); err != nil {
		t.Fatalf("truncate: %v: %s", err, out)
	}
	if out, err := exec.Command(mkfs, "-q", "-F", "-b", "1024", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot loop-mount an ext4 image (needs root and loop devices): %v: %s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	return mnt
}

// fillDir fills the file system at mnt, then dir with entries until not
// even an entry fits; it returns their names. The names are as long as the
// control socket's, so no gap left in a directory block could take it,
// and removing any one makes room for it.
func fillDir(t *testing.T, dir *jobdir.Dir, mnt string) []string {
	t.Helper()
	var entries []string
	for added := true; added; {
		// Blocks ext4 reserved for the last writes come back once they
		// are on disk: fill until a round adds nothing.
		testutil.Fill(t, mnt)
		added = false
		for {
			name := fmt.Sprintf("e%0*d", len(control.SocketName)-1, len(entries))
			f, err := dir.OpenFile(name, os.O_CREATE|os.O_WRONLY, 0o600)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil || len(entries) > 100_000 {
				t.Fatalf("filling the control directory with entries: %v after %d", err, len(entries))
			}
			f.Close()
			entries, added = append(entries, name), true
		}
		syscall.Sync()
	}
	return entries
}

// logLines records a logger's messages and wakes waiters on each.
type logLines struct {
	mu      sync.Mutex
	msgs    []string
	changed chan struct{}
}

func newLogLines() *logLines { return &logLines{changed: make(chan struct{})} }

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Level.String()+" "+r.Message)
	close(l.changed)
	l.changed = make(chan struct{})
	return nil
}

// count returns how many messages match re.
func (l *logLines) count(re string) int {
	match := regexp.MustCompile(re)
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if match.MatchString(m) {
			n++
		}
	}
	return n
}

// wait waits until a message matches re.
func (l *logLines) wait(t *testing.T, timeout time.Duration, re string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if l.count(re) > 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no log message matching %q within %v; got %q", re, timeout, l.msgs)
		}
	}
}

// TestControlSocketOnFullFileSystem: when the control directory has no
// room even for the socket's entry (a full ext4 whose directory block is
// full too), the daemon starts without its control socket, says so once
// at error level, and binds it by itself as soon as an entry is free.
func TestControlSocketOnFullFileSystem(t *testing.T) {
	mnt := loopExt4(t)
	logs := newLogLines()
	log := slog.New(logs)
	router, err := cache.NewRouter(regexp.MustCompile(`^(?P<dataset>[^/]+)/`))
	if err != nil {
		t.Fatal(err)
	}
	store, err := cache.Open(cache.Options{
		CacheDir:   jobdir.Path{Base: t.TempDir(), Names: []string{"cache"}},
		ControlDir: jobdir.Path{Base: mnt, Names: []string{"control"}},
		CacheSize:  1, Router: router, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	dir := store.ControlDir()
	entries := fillDir(t, dir, mnt)

	d := &Daemon{cfg: config.Default(), log: log, store: store}
	stop, err := d.serveControl()
	if err != nil {
		t.Fatalf("serveControl on a full control directory: %v, want the daemon to start without its socket", err)
	}
	defer stop()
	if n := logs.count(`^ERROR control socket cannot be created`); n != 1 {
		t.Fatalf("%d error lines about the control socket, want 1: %q", n, logs.msgs)
	}
	sock := dir.Join(control.SocketName)
	if c, err := net.Dial("unix", sock); err == nil {
		c.Close()
		t.Fatal("a control socket answers although none could be created")
	}

	must(t, dir.Remove(entries[0]))
	logs.wait(t, 3*controlRetry, `^INFO control socket created`)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("control socket once an entry was free: %v", err)
	}
	c.Close()
	if n := logs.count(`control socket cannot be created`); n != 1 {
		t.Fatalf("the failed retries were logged: %q", logs.msgs)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
