package e2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/control"
	"golang.org/x/sys/unix"
)

// Issue 12's reproductions: a protected checkpoint is never lost or
// misreported, because what a dataset is — its members, their shares, its
// place in the job's order, its scheme — is a recorded, job-wide fact.

// TestRebuiltNodeEvictsByRecord (reproduction 1): node 2 is lost after
// two checkpoints and rebuilt (newest first); when a third completes,
// every node evicts the oldest by the job's order, so one more loss later
// still leaves the newest protected checkpoint rebuildable.
func TestRebuiltNodeEvictsByRecord(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_DATASETS_CACHE_SIZE=2", "SCRFS_RESTART_MEMBER_TIMEOUT=20s").Start()
	writeCheckpoint(t, c, "ckpt.1", 50_000)
	want2 := writeCheckpoint(t, c, "ckpt.2", 50_000)
	n := c.replace(t, 2, false).Start()
	n.WaitState(60*time.Second, "ckpt.1", "protected")
	n.WaitState(60*time.Second, "ckpt.2", "protected")
	writeCheckpoint(t, c, "ckpt.3", 50_000)
	for i, n := range c.Nodes {
		n.WaitDataset(30*time.Second, "ckpt.1", "evicted", func(d *control.Dataset) bool { return d == nil })
		if d := n.Dataset("ckpt.2"); d == nil || d.State != "protected" {
			t.Fatalf("node %d after ckpt.3: ckpt.2 is %+v; the older ckpt.1 should have gone", i, d)
		}
	}
	// One more single loss: ckpt.2 is still rebuildable everywhere.
	n = c.replace(t, 1, false).Start()
	n.WaitState(60*time.Second, "ckpt.2", "protected")
	sameMeta(t, "node 1's ckpt.2 after two losses", treeMeta(t, n.Path("ckpt.2")), want2[1])
}

// TestPartialCheckpointNeverComplete (reproduction 2): every node wrote
// and closed its files, then node 3 was killed before completion and
// restarted (with its cache, or wiped). The checkpoint fails on every node
// with the reason — as node 3 joins, so the marker written afterwards
// finds it gone — and is never protected, flushed or listed complete.
func TestPartialCheckpointNeverComplete(t *testing.T) {
	for _, wiped := range []bool{false, true} {
		t.Run(fmt.Sprintf("wiped=%v", wiped), func(t *testing.T) {
			prefix := t.TempDir()
			c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
				"SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=1").Start()
			for i, n := range c.Nodes {
				writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 100_000, uint64(i))
			}
			var n *Node
			if wiped {
				n = c.replace(t, 3, false)
			} else {
				c.Nodes[3].Kill()
				n = c.Nodes[3]
			}
			n.Start()
			if err := os.WriteFile(c.Nodes[0].Path("ckpt.1", "COMPLETE"), nil, 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("marker of ckpt.1 after node 3's restart: %v, want success or ENOENT (failed already)", err)
			}
			c.WaitState(60*time.Second, "ckpt.1", "failed")
			want := "node 3 lost its copy: its daemon restarted"
			if wiped {
				want = "node 3 lost its copy: it restarted with an empty cache"
			}
			for i, n := range c.Nodes {
				st := n.Status()
				d := findRow(&st, "ckpt.1")
				// Node 3 may keep its own, as true, reason.
				ownReason := i == 3 && d != nil && strings.Contains(d.Reason, "being written when the daemon stopped")
				if d == nil || (!strings.Contains(d.Reason, want) && !ownReason) {
					t.Errorf("node %d: %+v, want failed saying %q", i, d, want)
				}
			}
			if _, errs, code := c.Nodes[0].CLI("flush", "--wait", "ckpt.1"); code == 0 {
				t.Errorf("scrfs flush of the partial checkpoint succeeded: %s", errs)
			}
			if _, err := os.Stat(prefix + "/.scrfs/index.json"); err == nil && readPrefixIndex(t, prefix).has("ckpt.1") {
				t.Errorf("the prefix index lists the partial checkpoint: %+v", readPrefixIndex(t, prefix).entry(t, "ckpt.1"))
			}
		})
	}
}

// TestOtherSchemeRefused (reproduction 5): a replacement started with
// another scheme is refused by the running job, both sides saying why, and
// the healthy nodes keep every dataset.
func TestOtherSchemeRefused(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=rs", "SCRFS_REDUNDANCY_PARITY=2",
		"SCRFS_DATASETS_COMPLETE=marker:COMPLETE", "SCRFS_RESTART_MEMBER_TIMEOUT=5s").Start()
	want := writeCheckpoint(t, c, "ckpt.1", 50_000)
	n := c.replace(t, 3, false)
	n.Env = append(n.Env, "SCRFS_REDUNDANCY_SCHEME=xor")
	n.StartNoWait()
	n.WaitLog(30*time.Second, "runs the job with", "xor")
	c.Nodes[0].WaitLog(30*time.Second, "refused connection", "runs the job with")
	for i, node := range c.Nodes[:3] {
		if d := node.Dataset("ckpt.1"); d == nil || d.State == "failed" {
			t.Fatalf("node %d after the mismatched replacement: %+v", i, d)
		}
		sameMeta(t, fmt.Sprintf("node %d's ckpt.1", i), treeMeta(t, node.Path("ckpt.1")), want[i])
	}
}

// TestDegradedClearsWhenMemberReturns (reproduction 6): nodes 0-2 of 4
// start, find node 3 away and degrade; when node 3 starts with its cache
// intact, the set is protected again without a restart.
func TestDegradedClearsWhenMemberReturns(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_RESTART_MEMBER_TIMEOUT=3s").Start()
	writeCheckpoint(t, c, "ckpt.1", 50_000)
	for _, n := range c.Nodes {
		must(t, n.Stop())
	}
	for _, n := range c.Nodes[:3] {
		n.StartNoWait()
	}
	for _, n := range c.Nodes[:3] {
		n.WaitReady(60 * time.Second)
		n.WaitState(30*time.Second, "ckpt.1", "degraded")
	}
	c.Nodes[3].Start()
	c.WaitState(60*time.Second, "ckpt.1", "protected")
}

// TestRestartOnFewerNodesAndBack (reproductions 3 and 4): a job of four
// restarted on the first three nodes' list keeps node 3's files (rebuilt
// once onto node 0, which says the set is degraded and why); restarted on
// the four again, node 3's own copy is found, node 0 drops its copy and
// every node is protected with what it wrote.
func TestRestartOnFewerNodesAndBack(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_RESTART_MEMBER_TIMEOUT=20s").Start()
	want := writeCheckpoint(t, c, "ckpt.1", 50_000)
	want3 := withoutMeta(treeSums(t, c.Nodes[3].CacheDir("ckpt.1")))
	for _, n := range c.Nodes {
		must(t, n.Stop())
	}
	three := "SCRFS_CLUSTER_NODES=" + strings.Join(c.Addrs[:3], ",")
	for _, n := range c.Nodes[:3] {
		n.Env = append(n.Env, three)
		n.StartNoWait()
	}
	for i, n := range c.Nodes[:3] {
		n.WaitReady(60 * time.Second)
		d := n.WaitState(60*time.Second, "ckpt.1", "degraded")
		if !strings.Contains(d.Reason, "node 0 holds the shares of two members") {
			t.Errorf("node %d: ckpt.1 degraded saying %q", i, d.Reason)
		}
		sameMeta(t, fmt.Sprintf("node %d's ckpt.1 on three nodes", i), treeMeta(t, n.Path("ckpt.1")), want[i])
	}
	hosted, err := filepath.Glob(c.Nodes[0].CacheDir("ckpt.1", ".scrfs", "hosted", "*"))
	must(t, err)
	if len(hosted) != 1 {
		t.Fatalf("node 0 hosts %v, want node 3's share", hosted)
	}
	if got := withoutMeta(treeSums(t, hosted[0])); !maps.Equal(got, want3) {
		t.Fatalf("node 0 hosts %v of node 3's files, node 3 wrote %v", got, want3)
	}
	if n := c.Nodes[0].log.count("rebuilding dataset", "ckpt.1"); n != 2 {
		t.Errorf("node 0 took part in %d rebuilds of ckpt.1, want one for each of the two ranks it plays", n)
	}

	for _, n := range c.Nodes[:3] {
		must(t, n.Stop())
		n.Env = n.Env[:len(n.Env)-1]
	}
	c.Start()
	c.WaitState(60*time.Second, "ckpt.1", "protected")
	for i, n := range c.Nodes {
		sameMeta(t, fmt.Sprintf("node %d's ckpt.1 back on four nodes", i), treeMeta(t, n.Path("ckpt.1")), want[i])
	}
	if left, _ := filepath.Glob(c.Nodes[0].CacheDir("ckpt.1", ".scrfs", "hosted", "*")); len(left) != 0 {
		t.Errorf("node 0 still hosts %v after node 3 came back", left)
	}
}

// withoutMeta leaves out scrfs's own files (redundancy data, record).
func withoutMeta(sums map[string]string) map[string]string {
	maps.DeleteFunc(sums, func(p string, _ string) bool { return strings.HasPrefix(p, ".scrfs") })
	return sums
}

// TestLargeRecord: a dataset whose record is larger than the peer layer's
// default message (16 MiB) — 5,000 files under a 3.5 KB directory path on
// one node, about 3.7 KB of record each — is recorded on every node,
// protected, and listed whole on the node that wrote none of it. Before
// the daemons' peer messages carried a record as large as the store
// accepts, node 0 could not send it ("frame too large") and the dataset
// stayed unprotected everywhere.
func TestLargeRecord(t *testing.T) {
	c := NewCluster(t, 2, "SCRFS_REDUNDANCY_SCHEME=xor").Start()
	must(t, os.Mkdir(c.Nodes[0].Path("big"), 0o755))
	component := strings.Repeat("d", 250)
	const levels, files = 14, 5000
	deep := func(n *Node, mk bool) int {
		dir := openDir(t, n.Path("big"))
		for range levels {
			if mk {
				must(t, unix.Mkdirat(dir, component, 0o755))
			}
			next := openDirAt(t, dir, component)
			unix.Close(dir)
			dir = next
		}
		return dir
	}
	dir := deep(c.Nodes[0], true)
	for i := range files {
		fd, err := unix.Openat(dir, fmt.Sprintf("f%04d", i), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		must(t, err)
		unix.Close(fd)
	}
	unix.Close(dir)
	must(t, os.WriteFile(c.Nodes[0].Path("big", "COMPLETE"), nil, 0o644))
	c.WaitState(2*time.Minute, "big", "protected")
	if st, err := os.Stat(filepath.Join(c.Nodes[1].CacheDir("big"), ".scrfs", "record.json")); err != nil || st.Size() <= 16<<20 {
		t.Fatalf("node 1's record: %v, %v; want more than 16 MiB (else this test does not exceed a default peer message)", st, err)
	}
	dir = deep(c.Nodes[1], false)
	defer unix.Close(dir)
	if names := namesAt(t, dir); len(names) != files {
		t.Fatalf("node 1 lists %d files of node 0's %d", len(names), files)
	}
}
