package e2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/internal/testutil"
)

// Issue 26's reproductions: a restart never loses progress. What survives
// is kept, the newest intact checkpoint is restored wherever it is, a node
// that returns catches up, every dataset being written settles, and a
// local fault never marks the durable copy bad.

// jobOn makes the job run on the nodes of order (indices into c.Nodes)
// from their next start, in that order: node order[j] is node j of a node
// list of their addresses, and the others take no part. It returns the
// job as it then runs. Every node must be stopped.
func (c *Cluster) jobOn(order []int) *Cluster {
	c.t.Helper()
	job := &Cluster{t: c.t}
	for _, i := range order {
		job.Addrs = append(job.Addrs, c.Addrs[i])
	}
	for j, i := range order {
		n := c.Nodes[i]
		n.Job = []string{"SCRFS_CLUSTER_NODES=" + strings.Join(job.Addrs, ","), fmt.Sprintf("SCRFS_CLUSTER_NODE_INDEX=%d", j)}
		job.Nodes = append(job.Nodes, n)
	}
	return job
}

// stopAll stops every running node of c.
func (c *Cluster) stopAll() {
	c.t.Helper()
	for _, n := range c.Nodes {
		if !n.hasExited() {
			must(c.t, n.Stop())
		}
	}
}

// ownFiles returns the sums of the files node n keeps of dataset name in
// its cache, scrfs's own files left out.
func ownFiles(t *testing.T, n *Node, name string) map[string]string {
	t.Helper()
	return withoutMeta(treeSums(t, n.CacheDir(name)))
}

// TestKeepWhatSurvives (item 1): a job of four restarted on two cannot
// rebuild its checkpoint (two members of four away, XOR tolerates one):
// it fails, is not served, and nodes 0 and 1 keep their files. Back on
// four nodes the checkpoint is verified and served again, byte for byte.
func TestKeepWhatSurvives(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_RESTART_MEMBER_TIMEOUT=10s").Start()
	want := writeCheckpoint(t, c, "ckpt.1", 50_000)
	own := []map[string]string{ownFiles(t, c.Nodes[0], "ckpt.1"), ownFiles(t, c.Nodes[1], "ckpt.1")}
	c.stopAll()

	two := c.jobOn([]int{0, 1}).Start()
	for i, n := range two.Nodes {
		d := n.WaitState(60*time.Second, "ckpt.1", "failed")
		if !strings.Contains(d.Reason, "tolerates") || !strings.Contains(d.Reason, "kept") {
			t.Errorf("node %d: ckpt.1 failed saying %q, want beyond tolerance, its files kept", i, d.Reason)
		}
		if _, err := os.Stat(n.Path("ckpt.1")); !os.IsNotExist(err) {
			t.Errorf("node %d serves the failed ckpt.1: %v", i, err)
		}
		if got := ownFiles(t, n, "ckpt.1"); !maps.Equal(got, own[i]) {
			t.Fatalf("node %d kept %v of its files of ckpt.1, it wrote %v", i, got, own[i])
		}
	}
	two.stopAll()

	c.jobOn([]int{0, 1, 2, 3}).Start()
	c.WaitState(60*time.Second, "ckpt.1", "protected")
	for i, n := range c.Nodes {
		sameMeta(t, fmt.Sprintf("node %d's ckpt.1 back on four nodes", i), treeMeta(t, n.Path("ckpt.1")), want[i])
	}
}

// TestRestoreNewestFromPrefix (item 2): the newer checkpoint is lost
// beyond tolerance in the caches (node 1's redundancy damaged, node 3
// wiped) while the older one is rebuilt; the newer is complete in the
// prefix, so the job fetches it rather than restart from the older one,
// says why, and every mount serves it byte for byte.
func TestRestoreNewestFromPrefix(t *testing.T) {
	prefix := t.TempDir()
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=0", "SCRFS_RESTART_MEMBER_TIMEOUT=10s").Start()
	want1 := writeCheckpoint(t, c, "ckpt.1", 50_000)
	want2 := writeCheckpoint(t, c, "ckpt.2", 60_000)
	if out, errs, code := c.Nodes[0].CLI("flush", "--wait", "ckpt.2"); code != 0 {
		t.Fatalf("scrfs flush --wait ckpt.2: exit %d: %s%s", code, out, errs)
	}
	c.stopAll()
	red, _ := filepath.Glob(filepath.Join(c.Nodes[1].CacheDir("ckpt.2"), ".scrfs", "*.redset"))
	if len(red) != 1 {
		t.Fatalf("node 1's redundancy files of ckpt.2: %v", red)
	}
	testutil.FlipByte(t, red[0], -30)
	wipe(t, c.Nodes[3])

	c.Start()
	c.WaitState(60*time.Second, "ckpt.2", "protected")
	c.WaitState(60*time.Second, "ckpt.1", "protected")
	for i, n := range c.Nodes {
		sameMeta(t, fmt.Sprintf("node %d's ckpt.2", i), treeMeta(t, n.Path("ckpt.2")), want2[i])
		sameMeta(t, fmt.Sprintf("node %d's ckpt.1", i), treeMeta(t, n.Path("ckpt.1")), want1[i])
		st := n.Status()
		if r := st.Node.Restored; r == nil || r.Dataset != "ckpt.2" || r.From != "prefix" {
			t.Errorf("node %d says it restored %+v, want ckpt.2 from the prefix", i, r)
		}
		// One row of it: the failure in the caches gave way to the
		// fetched copy.
		rows := 0
		for _, d := range slices.Concat(st.Datasets, st.Failed) {
			if d.Name == "ckpt.2" {
				rows++
			}
		}
		if rows != 1 {
			t.Errorf("node %d shows %d rows of ckpt.2: %+v", i, rows, st)
		}
	}
	c.Nodes[0].WaitLog(time.Second, "newer than what the caches hold", "dataset=ckpt.2")
}

// TestReturningNodeCatchesUp (item 3): node 3 is away while the job runs
// on three nodes, writes two checkpoints and evicts the two node 3 still
// holds; back on four nodes, node 3 shows exactly what the others show —
// the new checkpoints, read byte for byte, and neither of the evicted
// ones — also after a restart of its own.
func TestReturningNodeCatchesUp(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_DATASETS_CACHE_SIZE=2", "SCRFS_RESTART_MEMBER_TIMEOUT=10s").Start()
	writeCheckpoint(t, c, "ckpt.1", 30_000)
	writeCheckpoint(t, c, "ckpt.2", 30_000)
	c.stopAll()

	three := c.jobOn([]int{0, 1, 2}).Start()
	three.WaitState(60*time.Second, "ckpt.2", "degraded")
	want3 := writeCheckpoint(t, three, "ckpt.3", 40_000)
	want4 := writeCheckpoint(t, three, "ckpt.4", 40_000)
	three.stopAll()

	c.jobOn([]int{0, 1, 2, 3}).Start()
	n3 := c.Nodes[3]
	check := func(when string) {
		t.Helper()
		c.WaitState(60*time.Second, "ckpt.4", "protected")
		c.WaitState(60*time.Second, "ckpt.3", "protected")
		sameMeta(t, "node 3's ckpt.3 "+when, treeMeta(t, n3.Path("ckpt.3")), want3[0])
		sameMeta(t, "node 3's ckpt.4 "+when, treeMeta(t, n3.Path("ckpt.4")), want4[0])
		for _, name := range []string{"ckpt.1", "ckpt.2"} {
			n3.WaitDataset(30*time.Second, name, "gone", func(d *control.Dataset) bool { return d == nil || d.State == "failed" })
			if _, err := os.Stat(n3.Path(name)); !os.IsNotExist(err) {
				t.Errorf("node 3 shows %s, which the job evicted, %s: %v", name, when, err)
			}
		}
		for i, n := range c.Nodes {
			if got, want := shownNames(t, n), shownNames(t, c.Nodes[0]); !slices.Equal(got, want) {
				t.Errorf("node %d's mount shows %v, node 0's %v (%s)", i, got, want, when)
			}
		}
	}
	check("after it returned")
	n3.Kill()
	n3.Start()
	check("after its own restart")
}

// shownNames lists the top of n's mount.
func shownNames(t *testing.T, n *Node) []string {
	t.Helper()
	ents, err := os.ReadDir(n.Path())
	must(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestNodeZeroWipedWhileWriting (item 4): node 0 is killed and wiped
// while a checkpoint is written; the checkpoint cannot complete (node 0's
// share is gone) and fails on every node at once, saying so, rather than
// stay writing; `scrfs complete` through node 0 says it failed; the next
// checkpoint completes by a marker written through node 0.
func TestNodeZeroWipedWhileWriting(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_RESTART_MEMBER_TIMEOUT=10s").Start()
	for i, n := range c.Nodes {
		writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 40_000, uint64(i))
	}
	c.replace(t, 0, false).Start()
	c.WaitState(30*time.Second, "ckpt.1", "failed")
	for i, n := range c.Nodes {
		if d := n.Dataset("ckpt.1"); d != nil {
			t.Errorf("node %d still holds ckpt.1: %+v", i, d)
		}
		st := n.Status()
		if d := findRow(&st, "ckpt.1"); d == nil || !strings.Contains(d.Reason, "node 0") {
			t.Errorf("node %d: ckpt.1 is %+v, want failed naming node 0", i, d)
		}
	}
	if _, errs, code := c.Nodes[0].CLI("complete", "ckpt.1"); code == 0 || !strings.Contains(errs, "failed") {
		t.Errorf("scrfs complete ckpt.1 through node 0: exit %d: %s; want an error saying it failed", code, errs)
	}
	for i, n := range c.Nodes {
		writeRandom(t, n.Path("ckpt.2", fmt.Sprintf("rank_%d.bin", i)), 40_000, uint64(10+i))
	}
	must(t, os.WriteFile(c.Nodes[0].Path("ckpt.2", "COMPLETE"), nil, 0o644))
	c.WaitState(60*time.Second, "ckpt.2", "protected")
}

// smallCache puts node n's cache base on a tmpfs of size (root only).
func smallCache(t *testing.T, n *Node, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs for the cache needs root")
	}
	must(t, os.MkdirAll(n.Cache, 0o755))
	if err := syscall.Mount("tmpfs", n.Cache, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(n.Cache, syscall.MNT_DETACH) })
}

// fill writes a file at path until the file system is full, and returns
// its size.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		must(t, err)
	}
}

// TestRecordNotKeptFails (item 5): node 2's cache fills up while a
// checkpoint is written there (the writer gets ENOSPC), so the record
// cannot be kept beside node 2's files: the checkpoint fails on every node
// with that reason, is never flushed, and the job goes on.
func TestRecordNotKeptFails(t *testing.T) {
	prefix := t.TempDir()
	c := NewCluster(t, 3, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=1")
	smallCache(t, c.Nodes[2], "8m")
	c.Nodes[2].Env = append(c.Nodes[2].Env, "SCRFS_METRICS_LISTEN=127.0.0.1:0")
	c.Start()
	for i, n := range c.Nodes[:2] {
		writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 40_000, uint64(i))
	}
	if size := fill(t, c.Nodes[2].Path("ckpt.1", "rank_2.bin")); size == 0 {
		t.Fatal("node 2 wrote nothing before ENOSPC")
	}
	// The writer's ENOSPC is counted, whichever data path served it (the
	// kernel releases the file after close returned).
	testutil.Eventually(t, 10*time.Second, "node 2 counting its writer's ENOSPC", func() bool {
		return metricOr0(t, c.Nodes[2], `scrfs_fuse_errors_total{errno="ENOSPC",op="write"}`) >= 1
	})
	must(t, os.WriteFile(c.Nodes[0].Path("ckpt.1", "COMPLETE"), nil, 0o644))
	c.WaitState(60*time.Second, "ckpt.1", "failed")
	for i, n := range c.Nodes {
		st := n.Status()
		if d := findRow(&st, "ckpt.1"); d == nil || !strings.Contains(d.Reason, "record") || !strings.Contains(d.Reason, "node 2") {
			t.Errorf("node %d: ckpt.1 is %+v, want failed saying node 2 could not keep its record", i, d)
		}
	}
	if _, err := os.Stat(filepath.Join(prefix, ".scrfs", "index.json")); err == nil && readPrefixIndex(t, prefix).has("ckpt.1") {
		t.Errorf("the prefix index lists ckpt.1, whose record node 2 never kept: %+v", readPrefixIndex(t, prefix).entry(t, "ckpt.1"))
	}
	for i, n := range c.Nodes {
		writeRandom(t, n.Path("ckpt.2", fmt.Sprintf("rank_%d.bin", i)), 20_000, uint64(10+i))
	}
	must(t, os.WriteFile(c.Nodes[1].Path("ckpt.2", "COMPLETE"), nil, 0o644))
	c.WaitState(60*time.Second, "ckpt.2", "protected")
}

// TestFetchLocalFaultNotRecorded (item 5): every cache is wiped and node
// 1's is too full to take its share of the flushed checkpoint: the fetch
// fails there for a local reason, which is not the prefix copy's fault, so
// the index does not record a failed fetch; once space is freed the fetch
// is tried again and the job restores the checkpoint. A failed-fetch mark
// a real fault left is cleared by scrfs list --set-current.
func TestFetchLocalFaultNotRecorded(t *testing.T) {
	prefix := t.TempDir()
	c := NewCluster(t, 2, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=1")
	smallCache(t, c.Nodes[1], "16m")
	c.Start()
	for i, n := range c.Nodes {
		writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 4<<20, uint64(i))
	}
	must(t, os.WriteFile(c.Nodes[0].Path("ckpt.1", "COMPLETE"), nil, 0o644))
	c.WaitFlush(60*time.Second, "ckpt.1", "flushed")
	sums := clusterSums(t, c, "ckpt.1")
	c.stopAll()
	for _, n := range c.Nodes {
		wipe(t, n)
	}
	ballast := filepath.Join(c.Nodes[1].Cache, "ballast")
	fill(t, ballast)

	for _, n := range c.Nodes {
		n.StartNoWait()
	}
	c.Nodes[0].WaitLog(60*time.Second, "fetch failed for a reason of the node", "dataset=ckpt.1")
	must(t, os.Remove(ballast))
	for _, n := range c.Nodes {
		n.WaitReady(90 * time.Second)
	}
	c.WaitState(60*time.Second, "ckpt.1", "protected")
	for i, n := range c.Nodes {
		sameSums(t, fmt.Sprintf("ckpt.1 fetched on node %d", i), ownFiles(t, n, "ckpt.1"), sums[i])
	}
	if ff := readPrefixIndex(t, prefix).entry(t, "ckpt.1").FailedFetches; len(ff) != 0 {
		t.Fatalf("the index records failed fetches of ckpt.1 for a local fault: %+v", ff)
	}

	// A real fault's mark, cleared by the user.
	c.stopAll()
	testutil.FlipByte(t, filepath.Join(prefix, "ckpt.1", "rank_1.bin"), 100)
	for _, n := range c.Nodes {
		wipe(t, n)
	}
	c.Start()
	testutil.Eventually(t, 30*time.Second, "a failed fetch of the corrupt ckpt.1 in the index", func() bool {
		return len(readPrefixIndex(t, prefix).entry(t, "ckpt.1").FailedFetches) > 0
	})
	testutil.FlipByte(t, filepath.Join(prefix, "ckpt.1", "rank_1.bin"), 100) // repaired
	if out, errs, code := c.Nodes[0].CLI("list", "--set-current", "ckpt.1"); code != 0 {
		t.Fatalf("scrfs list --set-current ckpt.1: exit %d: %s%s", code, out, errs)
	}
	if ff := readPrefixIndex(t, prefix).entry(t, "ckpt.1").FailedFetches; len(ff) != 0 {
		t.Fatalf("--set-current left the failed fetches of ckpt.1: %+v", ff)
	}
}
