package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// torchPython returns a python3 that imports torch, or skips the test.
func torchPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import torch").Run() == nil {
			return py
		}
	}
	t.Skip("no python3 that imports torch (Debian's python3-torch; .ci/run installs it)")
	return ""
}

// torchRanks runs testdata/torch_ckpt.py phase as world ranks at once,
// rank r in directory dirs[r], and fails unless every rank says ok.
func torchRanks(t *testing.T, py, phase string, dirs []string) {
	t.Helper()
	// Below the ephemeral range: a port from ":0" was once taken, between
	// its check and rank 0's listen, as some connection's source port, and
	// the other ranks waited for the rendezvous until the timeout.
	port := strconv.Itoa(freePort(t, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	out := make([]string, len(dirs))
	errs := make([]error, len(dirs))
	for r, dir := range dirs {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, py, "testdata/torch_ckpt.py", phase, strconv.Itoa(r), strconv.Itoa(len(dirs)), port, dir)
			b, err := cmd.CombinedOutput()
			out[r], errs[r] = string(b), err
		})
	}
	wg.Wait()
	for r := range dirs {
		if errs[r] != nil || !strings.HasSuffix(strings.TrimSpace(out[r]), "ok") {
			t.Fatalf("%s, rank %d of %d in %s: %v\n%s", phase, r, len(dirs), dirs[r], errs[r], out[r])
		}
	}
}

// TestPyTorchCheckpoints: Debian's torch saves a distributed checkpoint
// (DCP) from 4 ranks, each through its own node's mount (rank 0 alone
// creates the directory and writes .metadata, which completes it), and
// loads it back on 4 ranks and resharded on 2, each from its own mount;
// plain torch.save from 4 ranks is loaded whole by every rank. The DCP
// checkpoint, flushed and fetched by a job of 2 nodes, is loaded there on
// 2 ranks without its shards crossing between the nodes.
func TestPyTorchCheckpoints(t *testing.T) {
	py := torchPython(t)
	t.Setenv("TORCH_CKPT_ROWS", "1024") // a sharded tensor of 16 MiB, 4 MiB per rank
	prefix := t.TempDir()
	env := []string{"SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:.metadata,marker:COMPLETE",
		"SCRFS_METRICS_LISTEN=127.0.0.1:0", "SCRFS_PATHS_PREFIX=" + prefix, "SCRFS_FLUSH_EVERY=0"}
	c := NewCluster(t, 4, env...).Start()
	mounts := func(name string, nodes ...int) []string {
		var out []string
		for _, i := range nodes {
			out = append(out, c.Nodes[i].Path(name))
		}
		return out
	}
	torchRanks(t, py, "dcp-save", mounts("dcp_200", 0, 1, 2, 3))
	c.WaitState(60*time.Second, "dcp_200", "protected")
	for i, n := range c.Nodes {
		if _, err := os.Stat(n.Path("dcp_200", ".metadata")); err != nil {
			t.Fatalf("node %d does not show the checkpoint's .metadata: %v", i, err)
		}
	}
	torchRanks(t, py, "dcp-load", mounts("dcp_200", 0, 1, 2, 3))
	for i, n := range c.Nodes[1:] {
		// Every rank read node 0's .metadata, and the replicated tensor
		// one rank wrote.
		if got := metric(t, n, "scrfs_namespace_received_bytes_total"); got == 0 {
			t.Errorf("node %d loaded the checkpoint without reading another node's file", i+1)
		}
	}
	before := metric(t, c.Nodes[3], "scrfs_namespace_received_bytes_total")
	torchRanks(t, py, "dcp-load", mounts("dcp_200", 2, 3))
	if metric(t, c.Nodes[3], "scrfs_namespace_received_bytes_total") == before {
		t.Errorf("node 3 loaded half of a 4-rank sharded tensor without reading another rank's shard")
	}

	must(t, os.Mkdir(c.Nodes[0].Path("ts_100"), 0o755))
	for i, n := range c.Nodes {
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("node %d sees ts_100", i), func() bool {
			_, err := os.Stat(n.Path("ts_100"))
			return err == nil
		})
	}
	torchRanks(t, py, "save", mounts("ts_100", 0, 1, 2, 3))
	must(t, os.WriteFile(c.Nodes[0].Path("ts_100", "COMPLETE"), nil, 0o644))
	c.WaitState(60*time.Second, "ts_100", "protected")
	torchRanks(t, py, "load", mounts("ts_100", 0, 1, 2, 3))

	// Flushed, every cache gone, a job of 2 nodes fetches the DCP
	// checkpoint: node j takes the parts of ranks 2j and 2j+1, which rank
	// j of the resharded load reads, so only the files rank 0 alone wrote
	// (.metadata, the replicated tensor) cross to node 1.
	if out, errs, code := c.Nodes[0].CLI("flush", "--wait", "dcp_200"); code != 0 {
		t.Fatalf("scrfs flush --wait dcp_200: exit %d: %s%s", code, out, errs)
	}
	stopWiped(t, c)
	c = NewCluster(t, 2, env...).Start()
	c.WaitState(60*time.Second, "dcp_200", "protected")
	torchRanks(t, py, "dcp-load", mounts("dcp_200", 0, 1))
	var moved float64
	for _, n := range c.Nodes {
		moved += metric(t, n, "scrfs_namespace_received_bytes_total")
	}
	const shard = 4 << 20
	t.Logf("the resharded load on 2 nodes moved %.1f MiB between them (a shard is %d MiB)", moved/(1<<20), shard>>20)
	if moved >= shard {
		t.Errorf("the resharded load on 2 nodes of what 4 flushed moved %.0f bytes between them, a shard or more: its parts are not where it reads them", moved)
	}
}
