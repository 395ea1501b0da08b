package fs

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// The mount guard is a small process of its own, started with every mount,
// that frees the mount at once when its daemon is killed and held in the
// kernel (see stuck.go): it watches the daemon, and aborts the connection
// when the daemon's main thread is gone while another is still there, so
// the application's call fails with ECONNABORTED instead of hanging until
// the next start. It ends when the daemon does. No event tells a process
// that another is half dead (pidfd reports only a thread group that is
// empty), so it looks every guardPoll.

// guardEnv carries "PID CONNECTION" to the guard; the program re-executes
// itself with it set.
const guardEnv = "SCRFS_MOUNT_GUARD"

// guardPoll is how often the guard looks at its daemon.
const guardPoll = 200 * time.Millisecond

// startGuard starts the guard of FUSE connection conn, served by this
// process. It runs in a process group of its own, so that the terminal's
// Ctrl-C (which the daemon turns into a clean stop) does not reach it; it
// inherits stderr to say what it did. Nothing waits for it: it must outlive
// a killed daemon.
func startGuard(conn int) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d", guardEnv, os.Getpid(), conn))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	return pid, nil
}

// Guard runs this process as a mount guard if it was started as one, and
// reports whether it was: the program's main must then exit at once.
func Guard() bool {
	spec, ok := os.LookupEnv(guardEnv)
	if !ok {
		return false
	}
	var pid, conn int
	if _, err := fmt.Sscanf(spec, "%d %d", &pid, &conn); err != nil || pid <= 0 {
		fmt.Fprintf(os.Stderr, "scrfs: bad %s=%q\n", guardEnv, spec)
		return true
	}
	guard(pid, conn)
	return true
}

// guard watches daemon pid until it is gone, aborting connection conn if
// it is killed but held.
func guard(pid, conn int) {
	for {
		time.Sleep(guardPoll)
		switch gone, held := procFate(pid); {
		case gone:
			return // it exited: closing its device ended the connection
		case held:
			if err := abortConnection(conn); err != nil {
				fmt.Fprintf(os.Stderr, "scrfs: daemon %d was killed and is held in the kernel; %v\n", pid, err)
			} else {
				fmt.Fprintf(os.Stderr, "scrfs: daemon %d was killed and is held in the kernel: aborted its FUSE connection %d\n", pid, conn)
			}
			return
		}
	}
}
