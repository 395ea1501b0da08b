package e2e

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/internal/testutil"
)

// TestControlFullRestart (issue 12, reproduction 8): a daemon killed with
// -9 whose control file system then fills up starts again, read-only: it
// serves its checkpoint byte-identical, says why in `scrfs status --json`,
// the log and the metrics, refuses new datasets with ENOSPC (so a
// checkpoint begun meanwhile fails job-wide, with its reason, rather than
// being protected without its share), and the other nodes keep everything.
// Once space is freed it leaves read-only by itself, new checkpoints work
// on every node again, and what it kept in memory meanwhile was written: a
// second kill -9 brings everything back.
func TestControlFullRestart(t *testing.T) {
	c, n, want1, free := restartControlFull(t, 2)

	// A checkpoint begun now cannot hold node 2's share: node 2 refuses
	// it with ENOSPC, and the job fails it rather than protect it. The
	// files whose names node 2 keeps cannot be made either (ENOSPC).
	for i, node := range c.Nodes {
		if i == 2 {
			continue
		}
		must(t, os.MkdirAll(node.Path("ckpt.2"), 0o755))
		err := os.WriteFile(node.Path("ckpt.2", fmt.Sprintf("rank_%d.bin", i)), make([]byte, 50_000), 0o644)
		if err != nil && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("node %d: a file of a dataset the read-only node refused: %v, want success or ENOSPC", i, err)
		}
	}
	if err := os.Mkdir(n.Path("ckpt.2"), 0o755); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("mkdir of a new dataset on the read-only node: %v, want ENOSPC", err)
	}
	if _, errs, code := c.Nodes[0].CLI("complete", "ckpt.2"); code != 0 {
		t.Fatalf("scrfs complete ckpt.2: exit %d: %s", code, errs)
	}
	c.WaitState(60*time.Second, "ckpt.2", "failed")
	for i, node := range c.Nodes {
		st := node.Status()
		if d := findRow(&st, "ckpt.2"); d == nil || !strings.Contains(d.Reason, "read-only") {
			t.Errorf("node %d: ckpt.2 is %+v, want failed saying node 2 was read-only", i, d)
		}
	}
	if ro := n.Status().Node.ReadOnly; ro == nil || ro.FailedWrites < 2 {
		t.Fatalf("node 2 after refusing a dataset: read_only %+v", ro)
	}

	// Space comes back: node 2 leaves read-only by itself.
	free()
	want3 := awaitWritable(t, c, n)

	// What node 2 kept in memory while read-only was written: after
	// another kill -9 every checkpoint comes back.
	n.Kill()
	n.Start()
	if ro := n.Status().Node.ReadOnly; ro != nil {
		t.Fatalf("node 2 restarted with space: read_only %+v", ro)
	}
	n.WaitState(60*time.Second, "ckpt.3", "protected")
	for name, want := range map[string][]map[string]string{"ckpt.1": want1, "ckpt.3": want3} {
		for i, node := range c.Nodes {
			sameMeta(t, fmt.Sprintf("node %d's %s at the end", i, name), treeMeta(t, node.Path(name)), want[i])
		}
	}
	st := n.Status()
	if d := findRow(&st, "ckpt.2"); d == nil || d.State != "failed" {
		t.Errorf("node 2 after the second restart: ckpt.2 is %+v, want still failed", d)
	}
}

// TestControlFullCoordinator: the same for node 0, which must record when
// every dataset begins: while it cannot, no dataset can begin anywhere
// (ENOSPC on every node), and the job resumes once space is freed.
func TestControlFullCoordinator(t *testing.T) {
	c, n, want1, free := restartControlFull(t, 0)
	if err := os.Mkdir(c.Nodes[1].Path("ckpt.2"), 0o755); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("mkdir of a new dataset on node 1 while node 0 is read-only: %v, want ENOSPC", err)
	}
	free()
	want3 := awaitWritable(t, c, n)
	for name, want := range map[string][]map[string]string{"ckpt.1": want1, "ckpt.3": want3} {
		for i, node := range c.Nodes {
			sameMeta(t, fmt.Sprintf("node %d's %s at the end", i, name), treeMeta(t, node.Path(name)), want[i])
		}
	}
}

// restartControlFull starts 4 daemons (xor) with node i's control
// directory on a small file system of its own, protects ckpt.1, kills
// node i with -9, fills its control file system and starts it again; it
// checks that node i is read-only (status, log, metric) and that every
// node still holds ckpt.1 protected, byte-identical. free frees the space.
func restartControlFull(t *testing.T, i int) (c *Cluster, n *Node, want1 []map[string]string, free func()) {
	t.Helper()
	c = NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE")
	n = c.Nodes[i]
	n.Control = testutil.MountTmpfs(t, "size=1m")
	n.Env = append(n.Env, "SCRFS_PATHS_CONTROL_BASE="+n.Control, "SCRFS_METRICS_LISTEN=127.0.0.1:0")
	c.Start()
	want1 = writeCheckpoint(t, c, "ckpt.1", 50_000)

	n.Kill()
	free = testutil.Fill(t, n.Control)
	n.Start()

	ro := n.Status().Node.ReadOnly
	if ro == nil || ro.Reason != "no_space" || !strings.Contains(ro.Error, "no space left on device") || ro.Since.IsZero() {
		t.Fatalf("node %d restarted on a full control file system: status read_only %+v", i, ro)
	}
	if out, _, _ := n.CLI("status"); !strings.Contains(out, "READ-ONLY since") || !strings.Contains(out, "no space left on device") {
		t.Fatalf("scrfs status of node %d does not say it is read-only:\n%s", i, out)
	}
	n.WaitLog(time.Second, "cannot write the cache state: read-only until it can", "reason=no_space")
	if v := metric(t, n, `scrfs_cache_read_only{reason="no_space"}`); v != 1 {
		t.Fatalf(`scrfs_cache_read_only{reason="no_space"} = %v while read-only`, v)
	}
	for j, node := range c.Nodes {
		if d := node.Dataset("ckpt.1"); d == nil || d.State != "protected" {
			t.Fatalf("node %d with node %d read-only: ckpt.1 is %+v", j, i, d)
		}
		sameMeta(t, fmt.Sprintf("node %d's ckpt.1 with node %d read-only", j, i), treeMeta(t, node.Path("ckpt.1")), want1[j])
	}
	return c, n, want1, free
}

// awaitWritable waits until n, whose control file system has room again,
// leaves read-only by itself (status, log, metric), then protects a new
// checkpoint, ckpt.3, on every node and returns what each shows of it.
func awaitWritable(t *testing.T, c *Cluster, n *Node) []map[string]string {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, n.Mount+" leaves read-only", func() bool { return n.Status().Node.ReadOnly == nil })
	n.WaitLog(time.Second, "leaving read-only")
	if v := metric(t, n, `scrfs_cache_read_only{reason="no_space"}`); v != 0 {
		t.Fatalf(`scrfs_cache_read_only{reason="no_space"} = %v after space came back`, v)
	}
	return writeCheckpoint(t, c, "ckpt.3", 50_000)
}

// TestControlFillsWhileWriting: node 2's control file system fills while a
// checkpoint is being written. Its completion cannot be recorded there, so
// it waits (the dataset stays writing, saying why, its bytes safe) instead
// of being completed in memory only; once space is freed within the
// completion round it completes, and the job protects it on every node.
func TestControlFillsWhileWriting(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_REDUNDANCY_TIMEOUT=60s")
	n := c.Nodes[2]
	n.Control = testutil.MountTmpfs(t, "size=1m")
	n.Env = append(n.Env, "SCRFS_PATHS_CONTROL_BASE="+n.Control)
	c.Start()
	for i, node := range c.Nodes {
		writeRandom(t, node.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 50_000, uint64(i))
	}
	free := testutil.Fill(t, n.Control)
	must(t, os.WriteFile(c.Nodes[0].Path("ckpt.1", "COMPLETE"), nil, 0o644))
	want := clusterSums(t, c, "ckpt.1")
	d := n.WaitDataset(30*time.Second, "ckpt.1", "waiting to complete", func(d *control.Dataset) bool {
		return d != nil && d.State == "writing" && strings.Contains(d.Reason, "waits until the cache state can be written")
	})
	if ro := n.Status().Node.ReadOnly; ro == nil || ro.Reason != "no_space" {
		t.Fatalf("node 2 while its completion waits: read_only %+v, dataset %+v", ro, d)
	}

	free()
	c.WaitState(60*time.Second, "ckpt.1", "protected")
	all, _ := union(t, want)
	for i, node := range c.Nodes {
		sameSums(t, fmt.Sprintf("node %d's ckpt.1", i), treeSums(t, node.Path("ckpt.1")), all)
	}
}
