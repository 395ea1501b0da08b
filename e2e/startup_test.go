package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// TestCheckpointThereAtStart: issue 25's empty mount at restart. On a new
// allocation (every cache empty, the checkpoint in the prefix), an
// application that looks for its newest checkpoint as soon as the mount
// appears finds it: lookups and listings wait until the job decided what
// it restores, they never answer that there is none meanwhile.
func TestCheckpointThereAtStart(t *testing.T) {
	prefix := t.TempDir()
	env := []string{"SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_PATHS_PREFIX=" + prefix, "SCRFS_FLUSH_EVERY=0"}
	c := NewCluster(t, 4, env...).Start()
	must(t, os.Mkdir(c.Nodes[0].Path("ckpt.1"), 0o755))
	for i, n := range c.Nodes {
		writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 8<<20, uint64(i+1))
	}
	must(t, os.WriteFile(c.Nodes[0].Path("ckpt.1", "COMPLETE"), nil, 0o644))
	c.WaitState(60*time.Second, "ckpt.1", "protected")
	if out, errs, code := c.Nodes[0].CLI("flush", "--wait", "ckpt.1"); code != 0 {
		t.Fatalf("scrfs flush --wait: exit %d: %s%s", code, out, errs)
	}
	stopWiped(t, c)
	for _, n := range c.Nodes {
		n.StartNoWait()
	}
	for i, n := range c.Nodes {
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("node %d's mount appears", i), func() bool { return mounted(n.Mount) })
		// At once: the restore is still deciding, or fetching.
		entries, err := os.ReadDir(n.Mount)
		if err != nil || len(entries) != 1 || entries[0].Name() != "ckpt.1" {
			t.Fatalf("node %d lists its mount as %v (%v) as soon as it appeared, want ckpt.1", i, entries, err)
		}
		if _, err := os.Stat(n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i))); err != nil {
			t.Fatalf("node %d: its checkpoint file as soon as the mount appeared: %v", i, err)
		}
	}
	c.WaitAll(60*time.Second, "scrfs ready")
}
