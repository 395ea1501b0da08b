package fs

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
)

// requestCounter counts the FUSE requests of a mount from go-fuse's debug
// log ("rx 12: LOOKUP n1 ..."); every other record goes to the wrapped
// handler.
type requestCounter struct {
	slog.Handler
	mu sync.Mutex
	n  map[string]int // by opcode name
}

// rxLine matches a request line: its opcode and node.
var rxLine = regexp.MustCompile(`^rx \d+: ([A-Z_]+) n(\d+) `)

// pollProbeNode is the node of go-fuse's poll probe at mount time (2^64-1),
// not the file system's; its RELEASE may come late.
const pollProbeNode = "18446744073709551615"

func (c *requestCounter) Enabled(context.Context, slog.Level) bool { return true }

func (c *requestCounter) Handle(ctx context.Context, r slog.Record) error {
	if m := rxLine.FindStringSubmatch(r.Message); m != nil {
		// The kernel sends INTERRUPT when a thread waiting for an answer
		// takes a signal, as this test process's threads may (it was
		// seen under load): it says nothing about what a file costs.
		if m[2] == pollProbeNode || m[1] == "INTERRUPT" {
			return nil
		}
		c.mu.Lock()
		c.n[m[1]]++
		c.mu.Unlock()
		return nil
	}
	if r.Level < slog.LevelWarn || r.NumAttrs() == 0 {
		return nil // go-fuse's debug lines (they carry no attributes)
	}
	return c.Handler.Handle(ctx, r)
}

// take returns the counts so far and starts again from zero. Requests the
// kernel sends in the background (RELEASE) may trail the system call that
// caused them, so callers first wait for what they expect.
func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// awaitCount waits until op has been counted want times (RELEASE is
// asynchronous: close(2) returns before the daemon sees it).
func (c *requestCounter) awaitCount(t *testing.T, tm *testMount, op string, want int) {
	t.Helper()
	for range 10000 {
		c.mu.Lock()
		got := c.n[op]
		c.mu.Unlock()
		if got >= want {
			return
		}
		// statfs is answered by the daemon, so one round trip later the
		// background queue has moved on; no timer involved.
		var st syscall.Statfs_t
		syscall.Statfs(tm.dir, &st)
	}
	t.Fatalf("%s counted fewer than %d times", op, want)
}

// TestRequestsPerFile pins down the FUSE round trips a checkpoint's small
// file costs (issue 16): create, write and close is LOOKUP + CREATE +
// RELEASE (asynchronous), plus one WRITE without passthrough. FLUSH is
// refused once and then never sent; nothing asks for attributes.
func TestRequestsPerFile(t *testing.T) {
	const files = 50
	for _, pt := range []string{"off", "auto"} {
		t.Run("passthrough="+pt, func(t *testing.T) {
			rc := &requestCounter{n: map[string]int{}}
			tm := mountTest(t, mountConfig{passthrough: pt, requests: rc})
			dir := filepath.Join(tm.dir, "ckpt.1")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			write := func(name string) {
				if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 4096), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("first") // the kernel learns FLUSH is not wanted
			rc.awaitCount(t, tm, "RELEASE", 1)
			rc.take()
			for i := range files {
				write(fmt.Sprint("f", i))
			}
			rc.awaitCount(t, tm, "RELEASE", files)
			got := rc.take()
			delete(got, "STATFS") // awaitCount's own
			want := map[string]int{"LOOKUP": files, "CREATE": files, "RELEASE": files}
			if pt == "off" || !tm.m.Passthrough() {
				want["WRITE"] = files
			}
			if !maps.Equal(got, want) {
				t.Fatalf("%d files cost %v, want %v", files, sorted(got), sorted(want))
			}
		})
	}
}

// TestRequestsPerMetadataChange pins down what changing a file's
// attributes costs, as tar and cp -p do after writing each file: one
// SETATTR each, and no GETATTR when the application then stats the file
// (the SETATTR's answer is cached like a GETATTR's). chown costs a GETATTR
// before its SETATTR: without FUSE_HANDLE_KILLPRIV the kernel re-reads the
// mode to clear set-user-ID bits itself (fs/fuse/dir.c, fuse_setattr).
func TestRequestsPerMetadataChange(t *testing.T) {
	rc := &requestCounter{n: map[string]int{}}
	tm := mountTest(t, mountConfig{passthrough: "auto", requests: rc, timeouts: time.Minute})
	dir := filepath.Join(tm.dir, "ckpt.1")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	rc.awaitCount(t, tm, "RELEASE", 1)
	mt := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	changes := []struct {
		what   string
		change func() error
		want   map[string]int
	}{
		{"chmod", func() error { return os.Chmod(p, 0o644) }, map[string]int{"SETATTR": 1}},
		{"utimens", func() error { return os.Chtimes(p, mt, mt) }, map[string]int{"SETATTR": 1}},
		{"chown", func() error { return os.Chown(p, os.Getuid(), os.Getgid()) }, map[string]int{"GETATTR": 1, "SETATTR": 1}},
		{"truncate", func() error { return os.Truncate(p, 100) }, map[string]int{"SETATTR": 1}},
	}
	for _, c := range changes {
		rc.take()
		if err := c.change(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		for range 3 {
			if _, err := os.Stat(p); err != nil {
				t.Fatal(err)
			}
		}
		if got := rc.take(); !maps.Equal(got, c.want) {
			t.Errorf("%s and three stats cost %v, want %v", c.what, sorted(got), sorted(c.want))
		}
	}
}

// TestCompleteDatasetCachedLong: names and attributes of a complete
// dataset stay in the kernel's cache even on a mount that caches nothing,
// so reading a checkpoint back asks the daemon once per file at most.
func TestCompleteDatasetCachedLong(t *testing.T) {
	rc := &requestCounter{n: map[string]int{}}
	tm := mountTest(t, mountConfig{timeouts: -1, requests: rc, rules: cache.Rules{Markers: []string{"COMPLETE"}}})
	dir := filepath.Join(tm.dir, "ckpt.2")
	os.Mkdir(dir, 0o755)
	for i := range 10 {
		os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), []byte("x"), 0o644)
	}
	statAll := func() {
		for i := range 10 {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprint("f", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	statAll()
	rc.take()
	statAll()
	if got := rc.take(); got["LOOKUP"] < 10 {
		t.Fatalf("a writing dataset on a mount without caching: %v, want a LOOKUP per stat", sorted(got))
	}
	os.WriteFile(filepath.Join(dir, "COMPLETE"), nil, 0o644)
	tm.awaitComplete(t, "ckpt.2")
	statAll() // cached now, for immutableTimeout
	rc.take()
	statAll()
	if got := rc.take(); got["LOOKUP"]+got["GETATTR"] > 1 { // the dataset root's own
		t.Fatalf("stat of a complete dataset's files: %v, want them cached", sorted(got))
	}
}

func sorted(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// TestReadsArriveWhole: a file read through the daemon (no passthrough)
// in 1 MiB reads costs about one READ per MiB. The kernel caps a FUSE
// mount's readahead at 128 KiB unless the mount's sysfs setting is raised,
// which only root may do: eight READs per MiB.
func TestReadsArriveWhole(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raising a mount's readahead needs root")
	}
	const size = 8 << 20
	rc := &requestCounter{n: map[string]int{}}
	tm := mountTest(t, mountConfig{passthrough: "off", requests: rc})
	p := filepath.Join(tm.dir, "ckpt.1", "big")
	if err := os.Mkdir(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	// Write-only: direct I/O, so the read below finds no page cached.
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	rc.awaitCount(t, tm, "RELEASE", 1)
	rc.take()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Read(buf); err != nil {
			break
		}
	}
	f.Close()
	if got := rc.take()["READ"]; got < size>>20 || got > 2*size>>20 {
		t.Fatalf("reading %d MiB in 1 MiB reads cost %d READs, want about %d", size>>20, got, size>>20)
	}
}
