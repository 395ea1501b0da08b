package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestPointerFilesJobWide: issue 25's pointer files on 4 daemons, as
// DeepSpeed keeps them: every rank writes its part of global_stepN, then
// rank 0 writes latest, which every node reads at once, and which
// completes the checkpoint (the rule "pointer"). A save killed before its
// pointer was written fails; after a restart of the whole job every node
// shows the newest checkpoint restored and the latest that names it; and
// so does a job of 2 nodes that fetched it from the prefix.
func TestPointerFilesJobWide(t *testing.T) {
	prefix := t.TempDir()
	env := []string{"SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=pointer", "SCRFS_PATHS_PREFIX=" + prefix, "SCRFS_FLUSH_EVERY=0"}
	c := NewCluster(t, 4, env...).Start()
	save := func(step int, pointer bool) string {
		t.Helper()
		name := fmt.Sprintf("global_step%d", step)
		must(t, os.Mkdir(c.Nodes[0].Path(name), 0o755))
		for i, n := range c.Nodes {
			writeRandom(t, n.Path(name, fmt.Sprintf("zero_pp_rank_%d_mp_rank_00_optim_states.pt", i)), 64<<10, uint64(step*10+i))
		}
		if pointer {
			must(t, os.WriteFile(c.Nodes[0].Path("latest"), []byte(name), 0o644))
		}
		return name
	}
	latestEverywhere := func(want string) {
		t.Helper()
		for i, n := range c.Nodes {
			if n.hasExited() {
				continue
			}
			if b, err := os.ReadFile(n.Path("latest")); err != nil || string(b) != want {
				t.Errorf("node %d reads latest as %q (%v), want %q", i, b, err, want)
			}
		}
	}
	for step := 1; step <= 2; step++ {
		name := save(step, true)
		latestEverywhere(name) // at once: node 0's write returned
		c.WaitState(60*time.Second, name, "protected")
	}
	// The third save: a node dies before rank 0 writes latest.
	save(3, false)
	c.Nodes[2].Kill()
	for _, n := range c.Nodes {
		n.Kill()
	}
	for _, n := range c.Nodes {
		n.StartNoWait()
	}
	c.WaitAll(60*time.Second, "scrfs ready")
	c.WaitState(60*time.Second, "global_step2", "protected")
	latestEverywhere("global_step2")
	for i, n := range c.Nodes {
		if _, err := os.Stat(n.Path("global_step3")); !os.IsNotExist(err) {
			t.Errorf("node %d shows the interrupted global_step3: %v", i, err)
		}
	}

	// Flushed, every cache gone, a job of 2 nodes fetches it.
	if out, errs, code := c.Nodes[0].CLI("flush", "--wait", "global_step2"); code != 0 {
		t.Fatalf("scrfs flush --wait global_step2: exit %d: %s%s", code, out, errs)
	}
	stopWiped(t, c)
	c = NewCluster(t, 2, env...).Start()
	c.WaitState(60*time.Second, "global_step2", "protected")
	latestEverywhere("global_step2")
}
