package e2e

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/loopback"
	"github.com/scrfs/scrfs/internal/testutil"
)

// treeMeta records, for every entry below root, its sha256 (or link
// target), mode and size, so a rebuilt tree can be compared entry by entry.
func treeMeta(t *testing.T, root string) map[string]string {
	t.Helper()
	sums := treeSums(t, root)
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%v %d %s", info.Mode(), info.Size(), sums[rel])
		if info.IsDir() {
			out[rel] = info.Mode().String()
		}
		return nil
	})
	must(t, err)
	return out
}

func sameMeta(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s: %q, want %q", what, k, got[k], v)
		}
	}
}

// writeCheckpoint writes dataset name on every node (different trees,
// modes, an empty file, a symlink) and completes it with a marker on node
// 0; it returns what each node's mount shows, to compare after a rebuild.
func writeCheckpoint(t *testing.T, c *Cluster, name string, size int64) []map[string]string {
	t.Helper()
	for i, n := range c.Nodes {
		for f := 0; f <= i%3; f++ {
			writeRandom(t, n.Path(name, fmt.Sprintf("rank_%d_%d.bin", i, f)), size+int64(1000*i+f), uint64(i*31+f+len(name)))
		}
		must(t, os.Chmod(n.Path(name, fmt.Sprintf("rank_%d_0.bin", i)), 0o600))
		if i == 1 {
			writeRandom(t, n.Path(name, "sub", "empty"), 0, 0)
			must(t, os.Symlink("../rank_1_0.bin", n.Path(name, "sub", "link")))
		}
	}
	must(t, os.WriteFile(c.Nodes[0].Path(name, "COMPLETE"), nil, 0o644))
	c.WaitState(60*time.Second, name, "protected")
	out := make([]map[string]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = treeMeta(t, n.Path(name))
	}
	return out
}

// replace kills node i, wipes its cache and control state, and starts a
// daemon with the same node index in its place: on the same address, or on
// a spare one (127.0.0.<n+1>) when spare is set.
func (c *Cluster) replace(t *testing.T, i int, spare bool) *Node {
	t.Helper()
	old := c.Nodes[i]
	old.Kill()
	must(t, os.RemoveAll(old.Cache))
	must(t, os.RemoveAll(old.Control))
	if !spare {
		// Same host: the same mountpoint and (wiped) directories.
		n := &Node{t: t, Mount: old.Mount, Cache: old.Cache, Control: old.Control, Env: old.Env}
		c.Nodes[i] = n
		return n
	}
	// A spare host: its own directories, and its own address at index i.
	var env []string
	for _, e := range old.Env {
		if !strings.HasPrefix(e, "SCRFS_PATHS_") {
			env = append(env, e)
		}
	}
	addrs := append([]string(nil), c.Addrs...)
	_, port, _ := net.SplitHostPort(c.Addrs[i])
	addrs[i] = net.JoinHostPort(loopback.IP(len(c.Addrs)), port)
	n := NewNode(t, append(env, "SCRFS_CLUSTER_NODES="+strings.Join(addrs, ","))...)
	c.Nodes[i] = n
	return n
}

type rebuildCase struct {
	name  string
	nodes int
	env   []string
	lose  [][]int // successive losses
}

var rebuildCases = []rebuildCase{
	{"partner", 4, []string{"SCRFS_REDUNDANCY_SCHEME=partner"}, [][]int{{1}, {2}}},
	// The copy path (what a kernel that refuses splice falls back to).
	{"partner-copy", 4, []string{"SCRFS_REDUNDANCY_SCHEME=partner", "SCRFS_ZEROCOPY=0"}, [][]int{{3}}},
	{"xor", 4, []string{"SCRFS_REDUNDANCY_SCHEME=xor"}, [][]int{{2}, {0}}},
	{"xor-copy", 4, []string{"SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_ZEROCOPY=0"}, [][]int{{1}}},
	{"rs", 5, []string{"SCRFS_REDUNDANCY_SCHEME=rs", "SCRFS_REDUNDANCY_PARITY=2"}, [][]int{{1, 3}, {0}}},
}

// TestRebuildLostNodes: SIGKILL members, wipe their caches, start
// replacements with the same node index (one on a spare address): the
// application reads byte-identical files with the same modes through the new
// mounts, and redundancy is restored, so a later loss is survivable too.
func TestRebuildLostNodes(t *testing.T) {
	for _, rc := range rebuildCases {
		t.Run(rc.name, func(t *testing.T) {
			env := append([]string{"SCRFS_DATASETS_COMPLETE=marker:COMPLETE", "SCRFS_RESTART_MEMBER_TIMEOUT=20s"}, rc.env...)
			c := NewCluster(t, rc.nodes, env...).Start()
			want := writeCheckpoint(t, c, "ckpt.1", 300_000)
			for round, lose := range rc.lose {
				var fresh []*Node
				for k, i := range lose {
					fresh = append(fresh, c.replace(t, i, round == 0 && k == 0))
				}
				for _, n := range fresh {
					n.StartNoWait()
				}
				for k, n := range fresh {
					n.WaitReady(60 * time.Second)
					n.WaitState(60*time.Second, "ckpt.1", "protected")
					i := lose[k]
					sameMeta(t, fmt.Sprintf("round %d: node %d's tree through its new mount", round, i), treeMeta(t, n.Path("ckpt.1")), want[i])
					if ds := n.Dataset("ckpt.1"); ds == nil || ds.State != "protected" {
						t.Fatalf("round %d: node %d: %+v", round, i, ds)
					}
				}
			}
			checkRedundancy(t, c, "ckpt.1")
		})
	}
}

// TestLossBeyondTolerance: the newer dataset has two members lost (one node
// replaced, one copy corrupted) and fails, with the nodes named; the older
// one is rebuilt and served; nothing hangs.
func TestLossBeyondTolerance(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_DATASETS_CACHE_SIZE=4", "SCRFS_RESTART_MEMBER_TIMEOUT=20s").Start()
	want := writeCheckpoint(t, c, "ckpt.1", 100_000)
	writeCheckpoint(t, c, "ckpt.2", 100_000)
	// Damage node 1's redundancy file of ckpt.2: flip a header byte.
	red, _ := filepath.Glob(filepath.Join(c.Nodes[1].CacheDir("ckpt.2"), ".scrfs", "*.redset"))
	testutil.FlipByte(t, red[0], -30)

	n := c.replace(t, 2, false)
	n.Start()
	n.WaitState(60*time.Second, "ckpt.1", "protected")
	sameMeta(t, "older dataset on the replacement", treeMeta(t, n.Path("ckpt.1")), want[2])
	for i, node := range c.Nodes {
		node.WaitState(60*time.Second, "ckpt.2", "failed")
		st := node.Status()
		found := false
		for _, f := range st.Failed {
			if f.Name == "ckpt.2" && strings.Contains(f.Reason, "nodes 1, 2") {
				found = true
			}
		}
		if !found {
			t.Fatalf("node %d: ckpt.2 not reported failed naming nodes 1 and 2: %+v", i, st.Failed)
		}
		if _, err := os.Stat(node.Path("ckpt.2")); !os.IsNotExist(err) {
			t.Fatalf("node %d: failed dataset still visible: %v", i, err)
		}
	}
}

// TestCorruptRedundancyNeverServed: a survivor's truncated parity is
// detected by the inventory; that survivor's copy is rebuilt from the
// others, and every byte read back is right.
func TestCorruptRedundancyNeverServed(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=rs", "SCRFS_REDUNDANCY_PARITY=2",
		"SCRFS_DATASETS_COMPLETE=marker:COMPLETE", "SCRFS_RESTART_MEMBER_TIMEOUT=20s").Start()
	want := writeCheckpoint(t, c, "ckpt.1", 200_000)
	red, _ := filepath.Glob(filepath.Join(c.Nodes[3].CacheDir("ckpt.1"), ".scrfs", "*.redset"))
	info, _ := os.Stat(red[0])
	if err := os.Truncate(red[0], info.Size()-100); err != nil {
		t.Fatal(err)
	}
	// Node 3's daemon restarts (its cache otherwise intact); node 0 is lost.
	c.Nodes[3].Kill()
	c.Nodes[3].Start()
	n := c.replace(t, 0, false)
	n.Start()
	n.WaitState(60*time.Second, "ckpt.1", "protected")
	c.Nodes[3].WaitState(60*time.Second, "ckpt.1", "protected")
	for i := range c.Nodes {
		sameMeta(t, fmt.Sprintf("node %d", i), treeMeta(t, c.Nodes[i].Path("ckpt.1")), want[i])
	}
	checkRedundancy(t, c, "ckpt.1")
}

// TestKillDuringRebuild: kill -9 the node being restored while its rebuild
// runs; on its next start the rebuild runs again and completes.
func TestKillDuringRebuild(t *testing.T) {
	c := NewCluster(t, 3, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_RESTART_MEMBER_TIMEOUT=20s", "SCRFS_REDUNDANCY_PIECE_SIZE=64KiB").Start()
	want := writeCheckpoint(t, c, "ckpt.1", 48<<20)
	n := c.replace(t, 1, false)
	n.StartNoWait()
	n.WaitLog(60*time.Second, "rebuilding dataset", "dataset=ckpt.1")
	n.Kill()
	must(t, os.RemoveAll(n.Cache)) // what the first attempt left is discarded anyway
	n.Start()
	n.WaitState(60*time.Second, "ckpt.1", "protected")
	sameMeta(t, "after an interrupted rebuild", treeMeta(t, n.Path("ckpt.1")), want[1])
}

// TestRestartWithoutCache: restart.from_cache = false clears the cache.
func TestRestartWithoutCache(t *testing.T) {
	n := NewNode(t, "SCRFS_DATASETS_COMPLETE=marker:COMPLETE").Start()
	writeRandom(t, n.Path("c1", "f"), 1000, 1)
	must(t, os.WriteFile(n.Path("c1", "COMPLETE"), nil, 0o644))
	n.WaitCompleted(10*time.Second, "c1")
	must(t, n.Stop())
	n.Env = append(n.Env, "SCRFS_RESTART_FROM_CACHE=false")
	n.Start()
	if len(n.Status().Datasets) != 0 {
		t.Fatalf("datasets after a restart with from_cache = false: %+v", n.Status().Datasets)
	}
	if _, err := os.Stat(n.CacheDir("c1")); !os.IsNotExist(err) {
		t.Fatalf("cache not cleared: %v", err)
	}
}

// TestEvictedRedundancyReused: with one dataset kept, a dataset is
// evicted once the next one is protected, and the encode after that writes
// its redundancy file over the evicted one's (a smaller checkpoint here,
// so the reused file must be cut to size). The result is what a fresh
// encode writes — parity checked against the reference — and a lost node
// is rebuilt from it byte for byte.
func TestEvictedRedundancyReused(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_DATASETS_COMPLETE=marker:COMPLETE", "SCRFS_DATASETS_CACHE_SIZE=1",
		"SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_RESTART_MEMBER_TIMEOUT=20s", "SCRFS_METRICS_LISTEN=127.0.0.1:0").Start()
	writeCheckpoint(t, c, "ckpt.1", 300_000)
	writeCheckpoint(t, c, "ckpt.2", 250_000)
	for _, n := range c.Nodes {
		n.WaitLog(10*time.Second, "dataset evicted", "dataset=ckpt.1")
	}
	want := writeCheckpoint(t, c, "ckpt.3", 200_000)
	for i, n := range c.Nodes {
		n.WaitLog(10*time.Second, "dataset evicted", "dataset=ckpt.2")
		if v := metric(t, n, "scrfs_cache_reused_redundancy_files_total"); v != 1 {
			t.Errorf("node %d reused %v redundancy files, want 1", i, v)
		}
	}
	checkRedundancy(t, c, "ckpt.3")

	n := c.replace(t, 2, false)
	n.StartNoWait()
	n.WaitReady(60 * time.Second)
	n.WaitState(60*time.Second, "ckpt.3", "protected")
	sameMeta(t, "node 2's tree rebuilt from reused redundancy files", treeMeta(t, n.Path("ckpt.3")), want[2])
	checkRedundancy(t, c, "ckpt.3")
}
