package e2e

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// A daemon killed while one of its threads tells the kernel that a dataset
// another node began exists (an entry invalidation, which waits for the
// mount's root while the application's mkdir there holds it) cannot exit,
// and the mkdir would hang for good. Its mount guard aborts the connection
// at once; when the guard is gone too, the daemon started next on the node
// does.
func TestKilledWhileHeldByTheKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it reads the daemon's kernel stacks to see it held")
	}
	t.Run("guard", func(t *testing.T) {
		n0, mkdir := killHeld(t, false)
		if n0.held != nil {
			t.Fatal("the killed daemon is still held: its guard did not free it")
		}
		if err := <-mkdir; !errors.Is(err, syscall.ECONNABORTED) {
			t.Errorf("the mkdir returned %v, want the aborted connection's error", err)
		}
		n0.WaitLog(10*time.Second, "was killed and is held in the kernel: aborted its FUSE connection")
		restartHeld(t, n0)
	})
	t.Run("next start", func(t *testing.T) {
		n0, mkdir := killHeld(t, true)
		if n0.held == nil {
			t.Fatal("the daemon exited: the kernel did not hold it, so this test did not reproduce the hang")
		}
		select {
		case err := <-mkdir:
			t.Fatalf("mkdir returned (%v) while its daemon is dead and held", err)
		default:
		}
		restartHeld(t, n0)
		if err := <-mkdir; !errors.Is(err, syscall.ECONNABORTED) && !errors.Is(err, syscall.ENOTCONN) {
			t.Errorf("the hung mkdir returned %v, want the aborted connection's error", err)
		}
		n0.WaitLog(10*time.Second, "aborted the FUSE connection of a killed daemon held in the kernel")
	})
}

var guardPid = regexp.MustCompile(`mount guard started.* pid=(\d+)`)

// killHeld kills node 0 of a 3-node job while the kernel holds it (node 2
// down makes node 0's mkdir wait, half the connect timeout, and node 1's
// dataset arrives meanwhile), its guard first when noGuard. It returns
// node 0 and the result of the mkdir.
func killHeld(t *testing.T, noGuard bool) (*Node, chan error) {
	c := NewCluster(t, 3, "SCRFS_REDUNDANCY_SCHEME=partner", "SCRFS_CLUSTER_CONNECT_TIMEOUT=30s").Start()
	n0 := c.Nodes[0]
	if noGuard {
		m := guardPid.FindStringSubmatch(n0.WaitLog(10*time.Second, "mount guard started"))
		if m == nil {
			t.Fatal("no guard pid in node 0's log")
		}
		pid, _ := strconv.Atoi(m[1])
		must(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	c.Nodes[2].Kill()
	mkdir := make(chan error, 1)
	go func() { mkdir <- os.Mkdir(n0.Path("ckpt.a"), 0o755) }()
	testutil.Eventually(t, 10*time.Second, "the mkdir to wait for node 0", func() bool {
		return strings.Contains(kernelStacks(os.Getpid()), "create_new_entry")
	})
	go os.Mkdir(c.Nodes[1].Path("ckpt.b"), 0o755) // node 0 hears of ckpt.b while its mkdir waits
	pid := n0.cmd.Process.Pid
	testutil.Eventually(t, 10*time.Second, "node 0 to invalidate ckpt.b's entry", func() bool {
		return strings.Contains(kernelStacks(pid), "fuse_reverse_inval_entry")
	})
	n0.Kill()
	return n0, mkdir
}

// restartHeld starts node 0 again; node 2 stays down, so it will not be
// ready (it waits for its set): what matters is that it starts, frees a
// held run if there is one, and mounts.
func restartHeld(t *testing.T, n0 *Node) {
	n0.StartNoWait()
	n0.waitFreed()
	n0.WaitLog(30*time.Second, "replaced a stale mount left by a daemon that is gone")
	if _, err := os.Stat(n0.Path()); err != nil {
		t.Errorf("node 0's new mount: %v", err)
	}
}
