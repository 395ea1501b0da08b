package fs

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/fs/mount"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/internal/testutil"
)

// testMount is a mounted FS over a fresh cache, with its store's completions
// delivered on a channel.
type testMount struct {
	dir       string
	store     *cache.Store
	m         *mount.Mount
	completed chan string
}

type mountConfig struct {
	match       string
	rules       cache.Rules
	passthrough string
	cacheSize   int
	allowOther  bool
	// timeouts overrides the mount's entry, attribute and negative
	// timeouts (1 s) when set; -1 means none. Unmounted node trees have
	// none.
	timeouts time.Duration
	// requests, when set, counts every FUSE request the kernel sends.
	requests *requestCounter
	// job is the job the mount asks; nil: none (a node alone).
	job Job
	// warnings, when set, also gets the warnings the mount logs.
	warnings io.Writer
}

// mountTest mounts an FS on a temp dir and unmounts it in Cleanup. FUSE
// debug output appears only under -v.
func mountTest(t testing.TB, mc mountConfig) *testMount {
	t.Helper()
	testutil.RequireFUSE(t)
	if mc.passthrough == "" {
		mc.passthrough = "off"
	}
	switch {
	case mc.timeouts < 0:
		mc.timeouts = 0
	case mc.timeouts == 0:
		mc.timeouts = time.Second
	}
	tm, fsys := newTestFS(t, mc)
	var err error
	tm.m, err = mount.New(tm.dir, fsys, mount.Options{
		CacheDir: tm.store.CacheDir(), MaxWrite: 1 << 20,
		AllowOther: mc.allowOther, Passthrough: mc.passthrough,
		Debug:  mc.requests != nil || testing.Verbose() && os.Getenv("SCRFS_FUSE_DEBUG") != "",
		Logger: fsys.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tm.m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return tm
}

// newTestFS returns an FS over a fresh cache in a temp dir, not mounted;
// the store is closed in Cleanup.
func newTestFS(t testing.TB, mc mountConfig) (*testMount, *FS) {
	t.Helper()
	if mc.match == "" {
		mc.match = `^(?P<dataset>[^/]+)/`
	}
	if mc.cacheSize == 0 {
		mc.cacheSize = 4
	}
	base := t.TempDir()
	router, err := cache.NewRouter(regexp.MustCompile(mc.match))
	if err != nil {
		t.Fatal(err)
	}
	tm := &testMount{dir: filepath.Join(base, "mnt"), completed: make(chan string, 16)}
	var log *slog.Logger
	if mc.requests != nil {
		mc.requests.Handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
		log = slog.New(mc.requests)
	} else {
		out := io.Writer(os.Stderr)
		if mc.warnings != nil {
			out = io.MultiWriter(os.Stderr, mc.warnings)
		}
		log = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	tm.store, err = cache.Open(cache.Options{
		CacheDir:   jobdir.Path{Base: base, Names: []string{"cache"}},
		ControlDir: jobdir.Path{Base: base, Names: []string{"control"}},
		CacheSize:  mc.cacheSize, Router: router, Rules: mc.rules, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	tm.store.Listen(func(e cache.Event) {
		if e.Kind == cache.EventCompleted {
			tm.completed <- e.Info.Name
		}
	})
	t.Cleanup(func() { tm.store.Close() })
	return tm, New(Options{Store: tm.store, Logger: log, Job: mc.job,
		EntryTimeout: mc.timeouts, AttrTimeout: mc.timeouts, NegativeTimeout: mc.timeouts})
}

func (tm *testMount) awaitComplete(t *testing.T, name string) {
	t.Helper()
	select {
	case got := <-tm.completed:
		if got != name {
			t.Fatalf("completed %s, want %s", got, name)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("dataset %s did not complete", name)
	}
}
