package e2e

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/internal/testutil"
)

// stopBound is how long a daemon may take from SIGTERM to gone: the
// applications waiting on the job are let go, the mount is unmounted, the
// protocols end.
const stopBound = 5 * time.Second

// blockedMkdir makes directory p from a goroutine of its own on a thread
// of its own, and returns once that thread waits inside the FUSE request
// (its kernel stack shows the wait for the daemon's answer): the thread's
// id, a channel that receives mkdir's result, and interrupting, which the
// caller calls before it interrupts the call. Until then an interrupted
// mkdir (EINTR) is made again: the Go runtime signals its own threads too
// (SIGURG, to preempt a goroutine), and on a loaded machine such a signal
// can reach the thread while it waits.
func blockedMkdir(t *testing.T, p string) (tid int, result <-chan error, interrupting func()) {
	t.Helper()
	tids := make(chan int, 1)
	errs := make(chan error, 1)
	var expected atomic.Bool
	go func() {
		// The thread is the one the signal must reach; it ends with the
		// goroutine rather than going back to the scheduler.
		runtime.LockOSThread()
		tids <- unix.Gettid()
		for {
			err := syscall.Mkdir(p, 0o755)
			if !errors.Is(err, syscall.EINTR) || expected.Load() {
				errs <- err
				return
			}
		}
	}()
	tid = <-tids
	stack := "/proc/self/task/" + strconv.Itoa(tid) + "/stack"
	// The kernel reports no event for "now blocked": the stack is polled.
	var b []byte
	blocked := testutil.Poll(20*time.Second, func() bool {
		select {
		case err := <-errs:
			t.Fatalf("mkdir %s returned (%v) without waiting for node 0", p, err)
		default:
		}
		b, _ = os.ReadFile(stack)
		return strings.Contains(string(b), "fuse")
	})
	if !blocked {
		t.Fatalf("mkdir %s never waited in the FUSE request; thread %d's stack:\n%s", p, tid, b)
	}
	return tid, errs, func() { expected.Store(true) }
}

// mkdirWaitingForNode0 starts a job of two daemons, hangs node 0 (SIGSTOP:
// its peers' calls are accepted by the kernel and never answered, so a
// call to it waits its whole bound instead of failing at once with
// "connection refused"), and has an application make a new dataset on
// node 1, which waits for node 0. It returns node 1 and the waiting
// mkdir (see blockedMkdir).
func mkdirWaitingForNode0(t *testing.T) (n *Node, tid int, result <-chan error, interrupting func()) {
	c := NewCluster(t, 2, "SCRFS_CLUSTER_CONNECT_TIMEOUT=2m").Start()
	must(t, c.Nodes[0].cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { c.Nodes[0].cmd.Process.Signal(syscall.SIGCONT) })
	n = c.Nodes[1]
	tid, result, interrupting = blockedMkdir(t, n.Path("ckpt.1"))
	return n, tid, result, interrupting
}

// awaitEINTR waits for the waiting mkdir to fail with EINTR.
func awaitEINTR(t *testing.T, what string, result <-chan error) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-result:
		if !errors.Is(err, syscall.EINTR) {
			t.Fatalf("%s: %v, want EINTR", what, err)
		}
		t.Logf("%s returned EINTR after %v", what, time.Since(start))
	case <-time.After(stopBound):
		t.Fatalf("%s still waits after %v", what, stopBound)
	}
}

// TestMkdirInterrupted: an application whose mkdir of a new dataset waits
// for node 0 (hung) is interrupted by a signal: its call returns EINTR at
// once, instead of after cluster.connect_timeout, and the daemon goes on.
func TestMkdirInterrupted(t *testing.T) {
	n, tid, result, interrupting := mkdirWaitingForNode0(t)
	// SIGURG: the Go runtime's own signal, handled and harmless here.
	interrupting()
	must(t, unix.Tgkill(os.Getpid(), tid, unix.SIGURG))
	awaitEINTR(t, "interrupted mkdir", result)
	if st := n.Status(); st.Node.Index != 1 {
		t.Fatalf("status after the interrupted mkdir: %+v", st.Node)
	}
}

// TestStopWithPeerDown: SIGTERM unmounts and stops a daemon within
// stopBound (its mountpoint no longer mounted) while an application's mkdir waits for node 0, which hangs;
// the application's call fails with EINTR rather than hang.
func TestStopWithPeerDown(t *testing.T) {
	n, _, result, interrupting := mkdirWaitingForNode0(t)
	interrupting()
	start := time.Now()
	must(t, n.cmd.Process.Signal(syscall.SIGTERM))
	if err := n.WaitExit(stopBound); err != nil {
		t.Fatalf("SIGTERM with node 0 hung and a mkdir waiting for it: exit %v", err)
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start))
	if mounted(n.Mount) {
		t.Fatal("still mounted after the daemon exited")
	}
	awaitEINTR(t, "the mkdir the stopped daemon was serving", result)
}

// TestStopUnderLoad: with every core busy, a job of two daemons that has
// written and protected a checkpoint stops within stopBound of SIGTERM,
// both mounts gone.
func TestStopUnderLoad(t *testing.T) {
	c := NewCluster(t, 2).Start()
	for i, n := range c.Nodes {
		writeRandom(t, n.Path("ckpt.1", "rank_"+strconv.Itoa(i)), 8<<20, uint64(i))
	}
	must(t, os.WriteFile(c.Nodes[0].Path("ckpt.1", "COMPLETE"), nil, 0o644))
	for _, n := range c.Nodes {
		n.WaitCompleted(30*time.Second, "ckpt.1")
	}
	for range 2 * runtime.NumCPU() {
		hog := exec.Command("sh", "-c", "while :; do :; done")
		must(t, hog.Start())
		t.Cleanup(func() { hog.Process.Kill(); hog.Wait() })
	}
	start := time.Now()
	for _, n := range c.Nodes {
		must(t, n.cmd.Process.Signal(syscall.SIGTERM))
	}
	for i, n := range c.Nodes {
		if err := n.WaitExit(stopBound); err != nil {
			t.Fatalf("node %d under load: %v", i, err)
		}
		if mounted(n.Mount) {
			t.Fatalf("node %d still mounted after it exited", i)
		}
	}
	t.Logf("both stopped %v after SIGTERM, every core busy", time.Since(start))
}
