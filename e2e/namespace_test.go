package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// Issue 13: every node sees every checkpoint. A DCP-like checkpoint: rank
// 0 creates the directory and the others write into it; a shard per rank,
// a replicated file and a .metadata marker on node 0, a config.json every
// rank writes alike (one file several nodes wrote), nested directories
// and a symlink.

// writeDCP writes dataset name on every node of c as DCP would (node 1
// also a file big.bin of big bytes, unless big is 0) and completes it with
// node 0's .metadata; it returns what each node showed of it before
// completion (its own files), as treeMeta.
func writeDCP(t *testing.T, c *Cluster, name string, shard, big int64) []map[string]string {
	t.Helper()
	must(t, os.Mkdir(c.Nodes[0].Path(name), 0o755))
	for i, n := range c.Nodes {
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("node %d sees %s", i, name), func() bool {
			_, err := os.Stat(n.Path(name))
			return err == nil
		})
		writeRandom(t, n.Path(name, fmt.Sprintf("__%d_0.distcp", i)), shard+int64(1000*i), uint64(i+1+len(name)))
		writeRandom(t, n.Path(name, "sub", fmt.Sprintf("r%d", i), "x.bin"), 10_000+int64(i), uint64(i+10))
		must(t, os.WriteFile(n.Path(name, "config.json"), []byte(`{"model": "dcp"}`), 0o644))
	}
	if big > 0 {
		writeRandom(t, c.Nodes[1].Path(name, "big.bin"), big, 77)
	}
	writeRandom(t, c.Nodes[0].Path(name, "replicated.pt"), 4<<20, 99)
	must(t, os.Symlink("replicated.pt", c.Nodes[0].Path(name, "latest")))
	own := make([]map[string]string, len(c.Nodes))
	for i, n := range c.Nodes {
		own[i] = ownTree(t, n, name)
	}
	must(t, os.WriteFile(c.Nodes[0].Path(name, ".metadata"), []byte("metadata"), 0o644))
	own[0][".metadata"] = fmt.Sprintf("%v %d %s", os.FileMode(0o644), len("metadata"), sha256hex([]byte("metadata")))
	c.WaitState(60*time.Second, name, "protected")
	return own
}

// ownTree is what node n wrote of dataset name, from its cache: while a
// dataset is written its mount shows every node's names (issue 29), the
// files other nodes made as empty placeholders, which the cache has as
// empty files only once the mount looked them up.
func ownTree(t *testing.T, n *Node, name string) map[string]string {
	t.Helper()
	out := treeMeta(t, n.CacheDir(name))
	for p, m := range out {
		if strings.HasPrefix(m, "-") && strings.Contains(m, " 0 ") {
			delete(out, p)
		}
	}
	return out
}

// jobView is what node j must show of a dataset the nodes wrote (own):
// its own tree, plus every other node's entries, the lowest node's first,
// where it has none of its own at that path.
func jobView(own []map[string]string, j int) map[string]string {
	out := maps.Clone(own[j])
	for i := range own {
		for p, m := range own[i] {
			if _, ok := out[p]; !ok {
				out[p] = m
			}
		}
	}
	return out
}

// TestEveryNodeSeesEveryCheckpoint: after completion every node lists,
// stats and reads every file of the checkpoint, byte-identical, through
// read, pread and mmap; four local readers of one remote file move it over
// the network once; status counts the job's files and the one file every
// node wrote.
func TestEveryNodeSeesEveryCheckpoint(t *testing.T) {
	c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:.metadata",
		"SCRFS_METRICS_LISTEN=127.0.0.1:0", "SCRFS_NAMESPACE_FETCH_WHOLE=64MiB").Start()
	own := writeDCP(t, c, "dcp_200", 1<<20, 66<<20+123)

	// Four readers on node 3 of the replicated file node 0 wrote.
	const readers = 4
	var wg sync.WaitGroup
	sums := make([]string, readers)
	for r := range readers {
		wg.Go(func() {
			b, err := os.ReadFile(c.Nodes[3].Path("dcp_200", "replicated.pt"))
			if err != nil {
				t.Error(err)
			}
			sums[r] = sha256hex(b)
		})
	}
	wg.Wait()
	want := treeSums(t, c.Nodes[0].Path("dcp_200"))["replicated.pt"]
	for r, s := range sums {
		if s != want {
			t.Fatalf("reader %d on node 3 read replicated.pt as %s, node 0 wrote %s", r, s, want)
		}
	}
	if got := metric(t, c.Nodes[3], "scrfs_namespace_received_bytes_total"); got != 4<<20 {
		t.Errorf("node 3 received %v bytes for %d readers of a 4 MiB file, want the file once", got, readers)
	}

	readWhileFetching(t, c)

	for j, n := range c.Nodes {
		sameMeta(t, fmt.Sprintf("node %d's dcp_200", j), treeMeta(t, n.Path("dcp_200")), jobView(own, j))
		d := n.Dataset("dcp_200")
		if d == nil || d.SharedFiles != 1 || d.JobFiles != int64(len(fileKeys(jobView(own, 0)))) {
			t.Errorf("node %d: status %+v, want 1 shared file and %d files", j, d, len(fileKeys(jobView(own, 0))))
		}
		if got, _ := os.ReadFile(n.Path("dcp_200", "config.json")); string(got) != `{"model": "dcp"}` {
			t.Errorf("node %d reads config.json as %q", j, got)
		}
	}

	// stat of another node's file is what its writer saw.
	for _, p := range []string{"__1_0.distcp", "sub/r1/x.bin"} {
		w, err := os.Lstat(c.Nodes[1].Path("dcp_200", p))
		must(t, err)
		r, err := os.Lstat(c.Nodes[2].Path("dcp_200", p))
		must(t, err)
		ws, rs := w.Sys().(*syscall.Stat_t), r.Sys().(*syscall.Stat_t)
		if !w.ModTime().Equal(r.ModTime()) || w.Mode() != r.Mode() || w.Size() != r.Size() || ws.Uid != rs.Uid || ws.Gid != rs.Gid {
			t.Errorf("%s: node 2 stats %v %v %d %d:%d, its writer %v %v %d %d:%d", p,
				r.Mode(), r.ModTime(), r.Size(), rs.Uid, rs.Gid, w.Mode(), w.ModTime(), w.Size(), ws.Uid, ws.Gid)
		}
	}
	if target, err := os.Readlink(c.Nodes[3].Path("dcp_200", "latest")); err != nil || target != "replicated.pt" {
		t.Errorf("node 3 reads node 0's symlink as %q, %v", target, err)
	}

	// pread at random offsets and a read-only mapping of node 1's shard on node 2.
	wantShard, err := os.ReadFile(c.Nodes[1].Path("dcp_200", "__1_0.distcp"))
	must(t, err)
	f, err := os.Open(c.Nodes[2].Path("dcp_200", "__1_0.distcp"))
	must(t, err)
	defer f.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		off := rng.IntN(len(wantShard))
		buf := make([]byte, min(1+rng.IntN(200_000), len(wantShard)-off))
		if _, err := f.ReadAt(buf, int64(off)); err != nil || !bytes.Equal(buf, wantShard[off:off+len(buf)]) {
			t.Fatalf("pread of %d bytes at %d on node 2: %v, or bytes differ", len(buf), off, err)
		}
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, len(wantShard), syscall.PROT_READ, syscall.MAP_SHARED)
	must(t, err)
	if !bytes.Equal(m, wantShard) {
		t.Errorf("mmap of node 1's shard on node 2 differs")
	}
	must(t, syscall.Munmap(m))
	if _, err := os.OpenFile(c.Nodes[2].Path("dcp_200", "__1_0.distcp"), os.O_WRONLY, 0); !isErrno(err, syscall.EROFS) {
		t.Errorf("writing another node's file of a complete checkpoint: %v, want EROFS", err)
	}
}

// readWhileFetching reads node 1's big.bin on node 2 while its copy is
// still being fetched (files of at most namespace.fetch_whole, 64 MiB
// here, are fetched whole at open):
// a pread near its end, a shared read-only mapping,
// a second open while the first is still open after the copy completed,
// and an open after both closed (the kernel refuses to mix passed-through
// and daemon-served opens of one file, so the mount must keep them apart).
func readWhileFetching(t *testing.T, c *Cluster) {
	t.Helper()
	want, err := os.ReadFile(c.Nodes[1].Path("dcp_200", "big.bin"))
	must(t, err)
	p := c.Nodes[2].Path("dcp_200", "big.bin")
	a, err := os.Open(p)
	must(t, err)
	defer a.Close()
	tail := make([]byte, 1000)
	if _, err := a.ReadAt(tail, int64(len(want)-len(tail))); err != nil || !bytes.Equal(tail, want[len(want)-len(tail):]) {
		t.Fatalf("pread of the end of a file being fetched: %v, or bytes differ", err)
	}
	m, err := syscall.Mmap(int(a.Fd()), 0, len(want), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("shared read-only mapping of a file being fetched: %v", err)
	}
	if !bytes.Equal(m, want) {
		t.Errorf("mapping of a file being fetched differs")
	}
	must(t, syscall.Munmap(m))
	for _, what := range []string{"while the first open is still open", "after both closed"} {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, want) {
			t.Fatalf("read %s: %d bytes, %v", what, len(b), err)
		}
		a.Close()
	}
}

// TestRemoteReadWhileHolderIsLost: a read of a file whose holder was
// killed waits for the rebuild onto its replacement and then returns the
// right bytes (XOR); under PARTNER it is served at once from the copy.
func TestRemoteReadWhileHolderIsLost(t *testing.T) {
	t.Run("xor", func(t *testing.T) {
		c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:.metadata",
			"SCRFS_RESTART_MEMBER_TIMEOUT=30s").Start()
		own := writeDCP(t, c, "dcp_300", 1<<20, 0)
		want := own[1]["__1_0.distcp"]
		c.Nodes[1].Kill()
		got := make(chan string, 1)
		go func() {
			info, err := os.Stat(c.Nodes[2].Path("dcp_300", "__1_0.distcp"))
			b, rerr := os.ReadFile(c.Nodes[2].Path("dcp_300", "__1_0.distcp"))
			if err != nil || rerr != nil {
				got <- fmt.Sprint(err, rerr)
				return
			}
			got <- fmt.Sprintf("%v %d %s", info.Mode(), len(b), sha256hex(b))
		}()
		n := c.replace(t, 1, false).Start()
		n.WaitState(60*time.Second, "dcp_300", "protected")
		if g := <-got; g != want {
			t.Fatalf("node 2 read node 1's shard during its rebuild as %q, want %q", g, want)
		}
	})
	t.Run("partner", func(t *testing.T) {
		c := NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=partner", "SCRFS_DATASETS_COMPLETE=marker:.metadata",
			"SCRFS_RESTART_MEMBER_TIMEOUT=30s").Start()
		own := writeDCP(t, c, "dcp_300", 1<<20, 0)
		c.Nodes[1].Kill()
		for _, j := range []int{0, 3} {
			got := treeMeta(t, c.Nodes[j].Path("dcp_300"))
			for p, m := range own[1] {
				if p != "config.json" && got[p] != m {
					t.Errorf("node %d reads node 1's %s as %q with node 1 down, want %q", j, p, got[p], m)
				}
			}
		}
		c.Nodes[0].WaitLog(10*time.Second, "read from a partner's copy")
	})
}

// TestNamespaceAlongTheTree: in a job of 12 daemons, larger than one
// fan-out (8), completion's messages reach every node through relays, over
// the links the relays make themselves (daemons link at start only within
// their set; with sets of 4, strided, no relay's next node is in its set):
// node 0 sends at most 8 of each kind, and every node shows every node's
// files. A relay killed and restarted is reached again.
func TestNamespaceAlongTheTree(t *testing.T) {
	c := NewCluster(t, 12, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_REDUNDANCY_SET_SIZE=4", "SCRFS_DATASETS_COMPLETE=marker:.metadata",
		"SCRFS_METRICS_LISTEN=127.0.0.1:0").Start()
	check := func(name string) {
		t.Helper()
		own := writeDCP(t, c, name, 64<<10, 0)
		for j, n := range c.Nodes {
			sameMeta(t, fmt.Sprintf("node %d's %s", j, name), treeMeta(t, n.Path(name)), jobView(own, j))
		}
	}
	check("dcp_1")
	for _, kind := range []string{"completion.began", "completion.share", "completion.record"} {
		sample := fmt.Sprintf(`scrfs_peer_requests_total{direction="sent",kind="jobnet.fanout:%s"}`, kind)
		if got := metric(t, c.Nodes[0], sample); got < 1 || got > 8 {
			t.Errorf("node 0 sent %v %s requests for one dataset of 12 nodes, want 1 to 8 (the tree's width)", got, kind)
		}
		// Node 3 passes what it receives on to node 4 (nodes 1..11 in 8 parts).
		relayed := metric(t, c.Nodes[3], sample)
		if relayed < 1 {
			t.Errorf("node 3 relayed %v %s requests, want at least 1", relayed, kind)
		}
	}
	c.Nodes[3].Kill()
	c.Nodes[3].Start()
	check("dcp_2")
}

// fileKeys returns the entries of a treeMeta that are regular files.
func fileKeys(meta map[string]string) []string {
	var out []string
	for p, m := range meta {
		if len(m) > 0 && m[0] == '-' {
			out = append(out, p)
		}
	}
	return out
}

func isErrno(err error, want syscall.Errno) bool {
	var errno syscall.Errno
	if pe, ok := err.(*os.PathError); ok {
		errno, _ = pe.Err.(syscall.Errno)
	}
	return errno == want
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
