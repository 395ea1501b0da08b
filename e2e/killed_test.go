package e2e

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledWhileHeldByTheKernel: a daemon killed while one of its threads
// tells the kernel that a dataset another node began exists (an entry
// invalidation, which waits for the mount's root while the application's
// mkdir there holds it) cannot exit, and the mkdir hangs. The daemon
// started next on the node aborts the dead one's connection: the mkdir
// fails instead of hanging, the killed process exits, and the node serves
// again.
func TestKilledWhileHeldByTheKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it reads the daemon's kernel stacks to see it held")
	}
	// A node that is down makes a mkdir wait half the connect timeout, the
	// window in which the other node's dataset must arrive.
	c := NewCluster(t, 3, "SCRFS_REDUNDANCY_SCHEME=partner", "SCRFS_CLUSTER_CONNECT_TIMEOUT=30s").Start()
	c.Nodes[2].Kill()
	n0 := c.Nodes[0]
	mkdir := make(chan error, 1)
	go func() { mkdir <- os.Mkdir(n0.Path("ckpt.a"), 0o755) }()
	waitFor(t, 10*time.Second, "the mkdir to wait for node 0", func() bool {
		return strings.Contains(kernelStacks(os.Getpid()), "create_new_entry")
	})
	go os.Mkdir(c.Nodes[1].Path("ckpt.b"), 0o755) // node 0 hears of ckpt.b while its mkdir waits
	pid := n0.cmd.Process.Pid
	waitFor(t, 10*time.Second, "node 0 to invalidate ckpt.b's entry", func() bool {
		return strings.Contains(kernelStacks(pid), "fuse_reverse_inval_entry")
	})
	n0.Kill()
	if n0.held == nil {
		t.Fatal("the daemon exited: the kernel did not hold it, so this test did not reproduce the hang")
	}
	select {
	case err := <-mkdir:
		t.Fatalf("mkdir returned (%v) while its daemon is dead and held", err)
	default:
	}
	// Node 2 stays down, so node 0 will not be ready (it waits for its
	// set); what matters is that the start frees the held run and mounts.
	n0.StartNoWait()
	n0.waitFreed()
	n0.WaitLog(30*time.Second, "replaced a stale mount left by a daemon that is gone")
	err := <-mkdir
	if !errors.Is(err, syscall.ECONNABORTED) && !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("the hung mkdir returned %v, want the aborted connection's error", err)
	}
	n0.WaitLog(10*time.Second, "aborted the FUSE connection of a killed daemon held in the kernel", fmt.Sprint(pid))
	if _, err := os.Stat(n0.Path()); err != nil {
		t.Errorf("node 0's new mount: %v", err)
	}
}
