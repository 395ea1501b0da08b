package cache

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/internal/testutil"
)

// onSmallFS opens a test store whose control directory is on a tmpfs of
// its own, and returns the tmpfs.
func onSmallFS(t *testing.T, cacheSize int, reg prometheus.Registerer) (*testStore, string) {
	t.Helper()
	ctl := testutil.MountTmpfs(t, "size=256k")
	ts := newTestStore(t, Rules{}, cacheSize, func(o *Options) {
		o.ControlDir = jobdir.Path{Base: ctl, Names: []string{"control"}}
		o.Registerer = reg
	})
	return ts, ctl
}

// complete writes dataset name with one file of n bytes and completes it.
func (ts *testStore) complete(t *testing.T, name string, n int) {
	t.Helper()
	ts.write(t, name, "f", n)
	must(t, ts.RequestComplete(name, "t"))
	ts.awaitComplete(t, name)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// readOnlyMetric returns scrfs_cache_read_only by reason.
func readOnlyMetric(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	must(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "scrfs_cache_read_only" {
			continue
		}
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if len(out) != len(ReadOnlyReasons) {
		t.Fatalf("scrfs_cache_read_only has series %v, want one per reason %v", out, ReadOnlyReasons)
	}
	return out
}

// stateOnDisk reads the state file as a restart would.
func stateOnDisk(t *testing.T, ts *testStore) stateFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ts.opts.ControlDir.String(), stateName))
	must(t, err)
	st, err := decodeState(data)
	must(t, err)
	return st
}

func (st stateFile) find(name string) *Info {
	for i := range st.Datasets {
		if st.Datasets[i].Name == name {
			return &st.Datasets[i]
		}
	}
	return nil
}

// TestControlFullReadOnly: the control directory's file system fills up
// under a running store. The store goes read-only: nothing it cannot write
// happens (no eviction, no completion, no new dataset or directory), what a
// restart would reconstruct anyway is kept in memory, and the metric says
// so. Once space is freed the store leaves read-only by itself, writes what
// it kept, and completes and evicts what waited.
func TestControlFullReadOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts, ctl := onSmallFS(t, 1, reg)
	ts.complete(t, "ckpt.1", 10)
	must(t, ts.SetFlush("ckpt.1", FlushStatus{State: FlushScheduled})) // pinned
	ts.complete(t, "ckpt.2", 20)
	ts.write(t, "ckpt.3", "f", 30)
	if _, ro := ts.ReadOnly(); ro {
		t.Fatal("read-only before the control directory filled")
	}

	free := testutil.Fill(t, ctl)

	// Another file of the control directory fails to write first (node
	// 0's ledger, say): the store finds out by itself.
	if err := ts.ControlDir().WriteFileAtomic("ledger.json", []byte("{}"), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing another control file on a full file system: %v", err)
	}
	testutil.Eventually(t, readOnlyWait, "read-only after another file failed to write", func() bool { _, ro := ts.ReadOnly(); return ro })
	ro, _ := ts.ReadOnly()
	if ro.Reason != "no_space" || !errors.Is(ro.Err, syscall.ENOSPC) || ro.Failures != 1 {
		t.Fatalf("read-only after a failed write: %+v", ro)
	}

	// The flush ends: ckpt.1 would be evicted, but its eviction cannot
	// be written, so it stays, files and all.
	must(t, ts.SetFlush("ckpt.1", FlushStatus{State: FlushDone}))
	if ro, _ := ts.ReadOnly(); ro.Failures < 2 {
		t.Fatalf("the flush status change did not try to write: %+v", ro)
	}
	if ts.Get("ckpt.1") == nil || fileMissing(filepath.Join(ts.CacheDir(), "ckpt.1", "f")) {
		t.Fatal("ckpt.1 evicted although its eviction could not be written")
	}
	// A completion cannot be written: it waits, saying why.
	must(t, ts.RequestComplete("ckpt.3", "t"))
	if info := ts.Get("ckpt.3").Info(); info.State != Writing || !strings.Contains(info.Reason, "waits until the cache state can be written") {
		t.Fatalf("ckpt.3 completed while read-only: %+v", info)
	}
	// New datasets and directories are refused with ENOSPC, and the
	// refused dataset is failed here (this node cannot vouch for it).
	_, _, err := ts.Obtain(Route{Name: "ckpt.4", Kind: KindDir, Root: "ckpt.4"})
	if errno, _ := Errno(err); !errors.Is(err, ErrControlFull) || errno != syscall.ENOSPC {
		t.Fatalf("new dataset while read-only: %v (errno %v), want ErrControlFull/ENOSPC", err, errno)
	}
	if _, err := os.Stat(filepath.Join(ts.CacheDir(), "ckpt.4")); !os.IsNotExist(err) {
		t.Fatalf("refused dataset has a directory: %v", err)
	}
	if f := ts.Failures(); len(f) != 1 || f[0].Name != "ckpt.4" || !strings.Contains(f[0].Reason, "read-only") {
		t.Fatalf("failures after a refused dataset: %+v", f)
	}
	if err := ts.AddNamespaceDir("runs", 0o755); !errors.Is(err, ErrControlFull) {
		t.Fatalf("namespace directory while read-only: %v", err)
	}
	if _, ok := ts.NamespaceDirs()["runs"]; ok {
		t.Fatal("refused namespace directory is listed")
	}
	// A verdict is kept in memory: a restart takes stock again.
	must(t, ts.SetState("ckpt.2", Protected, ""))
	if st := ts.Get("ckpt.2").State(); st != Protected {
		t.Fatalf("ckpt.2 is %s", st)
	}
	if m := readOnlyMetric(t, reg); m["no_space"] != 1 || m["quota"] != 0 {
		t.Fatalf("scrfs_cache_read_only while full: %v", m)
	}
	// The state on disk is what it was before the file system filled.
	disk := stateOnDisk(t, ts)
	if d := disk.find("ckpt.2"); d == nil || d.State != Complete {
		t.Fatalf("ckpt.2 on disk: %+v", d)
	}
	if d := disk.find("ckpt.3"); d == nil || d.State != Writing {
		t.Fatalf("ckpt.3 on disk: %+v", d)
	}

	// Space comes back: the store writes by itself, the completion that
	// waited happens, and the evictions with it (cache size 1).
	free()
	ts.awaitComplete(t, "ckpt.3")
	if _, active := ts.ReadOnly(); active {
		t.Fatal("still read-only after a successful write")
	}
	if m := readOnlyMetric(t, reg); m["no_space"] != 0 {
		t.Fatalf("scrfs_cache_read_only after space came back: %v", m)
	}
	if ts.Get("ckpt.1") != nil || ts.Get("ckpt.2") != nil {
		t.Fatal("older datasets not evicted once the state could be written")
	}
	disk = stateOnDisk(t, ts)
	if d := disk.find("ckpt.3"); d == nil || d.State != Complete || d.Reason != "" {
		t.Fatalf("ckpt.3 on disk after space came back: %+v", d)
	}
	// What was kept in memory is written too.
	if len(disk.Datasets) != 1 || len(disk.Failed) != 1 || disk.Failed[0].Name != "ckpt.4" {
		t.Fatalf("state on disk after space came back: %+v", disk)
	}
	if _, _, err := ts.Obtain(Route{Name: "ckpt.5", Kind: KindDir, Root: "ckpt.5"}); err != nil {
		t.Fatalf("new dataset after space came back: %v", err)
	}
}

// TestStartWithControlFull: a store killed while its control file system
// is full opens all the same (the lock, the state and the reconciliation
// need no free space), read-only, with every completed dataset; a dataset
// that was being written fails in memory. It leaves read-only on its own
// when space comes back, with nothing else changing.
func TestStartWithControlFull(t *testing.T) {
	ts, ctl := onSmallFS(t, 2, nil)
	ts.complete(t, "ckpt.1", 10)
	must(t, ts.SetRecord("ckpt.1", 7, time.Now()))
	must(t, ts.SetState("ckpt.1", Protected, ""))
	ts.write(t, "ckpt.2", "f", 20)
	free := testutil.Fill(t, ctl)

	ts.reopen(t)
	ro, active := ts.ReadOnly()
	if !active || ro.Reason != "no_space" {
		t.Fatalf("opened on a full control directory: read-only %v %+v", active, ro)
	}
	if info := ts.Get("ckpt.1").Info(); info.State != Protected || info.Seq != 7 || info.Bytes != 10 {
		t.Fatalf("completed dataset after the restart: %+v", info)
	}
	pid, err := os.ReadFile(filepath.Join(ctl, "control", "lock"))
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this pid", pid, err)
	}
	ts.FailWriting("incomplete")
	if ts.Get("ckpt.2") != nil || len(ts.Failures()) != 1 {
		t.Fatalf("writing dataset after FailWriting: %v, failures %+v", ts.Get("ckpt.2"), ts.Failures())
	}

	free()
	testutil.Eventually(t, readOnlyWait, "read-only ends", func() bool { _, ro := ts.ReadOnly(); return !ro })
	disk := stateOnDisk(t, ts)
	if disk.find("ckpt.2") != nil || len(disk.Failed) != 1 || disk.find("ckpt.1") == nil {
		t.Fatalf("state written after space came back: %+v", disk)
	}
}

// TestStartWithControlReadOnlyFS: a control file system remounted
// read-only (EROFS) opens too, with its own reason.
func TestStartWithControlReadOnlyFS(t *testing.T) {
	ts, ctl := onSmallFS(t, 2, nil)
	ts.complete(t, "ckpt.1", 10)
	ts.Close()
	remount := func(opt string) {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "remount,"+opt, ctl).CombinedOutput(); err != nil {
			t.Fatalf("remount %s: %v: %s", opt, err, out)
		}
	}
	remount("ro")
	t.Cleanup(func() { exec.Command("mount", "-o", "remount,rw", ctl).Run() })
	ts.Store = nil
	ts.reopen(t)
	if ro, active := ts.ReadOnly(); !active || ro.Reason != "read_only_fs" {
		t.Fatalf("opened on a read-only control file system: %v %+v", active, ro)
	}
	if d := ts.Get("ckpt.1"); d == nil || d.State() != Complete {
		t.Fatalf("ckpt.1 on a read-only control file system: %v", d)
	}
	remount("rw")
	testutil.Eventually(t, readOnlyWait, "read-only ends", func() bool { _, ro := ts.ReadOnly(); return !ro })
}

func fileMissing(p string) bool {
	_, err := os.Stat(p)
	return err != nil
}

// readOnlyWait is how long a test waits for the store's read-only state to
// change: the retry has no event of its own, so the state is polled.
const readOnlyWait = 3 * retryEvery
