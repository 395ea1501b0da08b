package mount

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/internal/testutil"
)

// Two kinds of this package's goroutines have no owner that waits, by
// design (see fs/fs_test.go): the statfs of a hung mount, and the wait for
// the server of a busy, lazily detached one. No test here makes them
// outlive it.
func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/fs/mount.") }

// emptyTree is the smallest Tree: an empty root directory that records
// what its mount told it.
type emptyTree struct {
	gofs.Inode
	server      *fuse.Server
	passthrough []bool
}

func (t *emptyTree) Root() gofs.InodeEmbedder    { return t }
func (t *emptyTree) NodeOptions() *gofs.Options  { return &gofs.Options{} }
func (t *emptyTree) Mounted(server *fuse.Server) { t.server = server }
func (t *emptyTree) SetPassthrough(on bool)      { t.passthrough = append(t.passthrough, on) }

// TestMountLifecycle mounts a tree, refuses a second mount over it while
// it is served, and unmounts it.
func TestMountLifecycle(t *testing.T) {
	testutil.RequireFUSE(t)
	cache, dir := t.TempDir(), filepath.Join(t.TempDir(), "mnt") // dir is created
	tree := &emptyTree{}
	m, err := New(dir, tree, Options{CacheDir: cache, MaxWrite: 1 << 20, Passthrough: "off"})
	if err != nil {
		t.Fatal(err)
	}
	if tree.server == nil {
		t.Error("the tree was not handed its server")
	}
	if want := []bool{false, false}; !slices.Equal(tree.passthrough, want) {
		t.Errorf("passthrough told %v, want %v (off before the mount and after)", tree.passthrough, want)
	}
	mi, ok := mountAt(dir)
	if !ok || mi.fstype != "fuse.scrfs" || mi.source != cache {
		t.Errorf("mount table at %s: %+v (found %v), want fuse.scrfs from %s", dir, mi, ok, cache)
	}
	if _, err := New(dir, &emptyTree{}, Options{CacheDir: cache}); err == nil || !strings.Contains(err.Error(), "daemon is alive") {
		t.Errorf("a second mount over a served one: %v, want it refused", err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	m.Wait()
	if _, ok := mountAt(dir); ok {
		t.Errorf("%s is still mounted after Unmount", dir)
	}
}

// TestGuardEndsWithItsDaemon: a guard whose daemon exits ends without
// aborting anything.
func TestGuardEndsWithItsDaemon(t *testing.T) {
	daemon := exec.Command("sleep", "60")
	if err := daemon.Start(); err != nil {
		t.Skipf("no sleep to stand for a daemon: %v", err)
	}
	type result struct {
		aborted bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		aborted, err := Guard(daemon.Process.Pid, 0)
		done <- result{aborted, err}
	}()
	daemon.Process.Kill()
	daemon.Wait()
	select {
	case r := <-done:
		if r.aborted || r.err != nil {
			t.Errorf("guard of an exited daemon: aborted %v, err %v", r.aborted, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the guard outlived its daemon")
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/plain`:          "/mnt/plain",
		`/mnt/with\040space`:  "/mnt/with space",
		`/mnt/tab\011and\134`: "/mnt/tab\tand\\",
		`/mnt/trailing\04`:    `/mnt/trailing\04`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestKillPending: a daemon whose main thread waits in the kernel when it
// is killed shows SIGKILL pending, for the thread or the process, and is
// then held; other pending signals are not a kill.
func TestKillPending(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   bool
	}{
		{"Name:\tscrfs\nState:\tD (disk sleep)\nSigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n", true},
		{"Name:\tscrfs\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000004100\n", true},
		{"Name:\tscrfs\nSigPnd:\t0000000000004000\nShdPnd:\t0000000000000000\n", false}, // SIGTERM only
		{"Name:\tscrfs\nSigPnd:\tzz\n", false},
		{"", false},
	} {
		if got := killPending([]byte(tc.status)); got != tc.want {
			t.Errorf("killPending(%q) = %v, want %v", tc.status, got, tc.want)
		}
	}
}
