package mount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
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
//
// It is the daemon's own program run again, by a command its caller names
// (Options.Guard; scrfs's is the hidden `scrfs mount-guard PID CONN`),
// which calls Guard: a process of its own, because it must outlive a
// daemon that is killed.

// guardPoll is how often the guard looks at its daemon.
const guardPoll = 200 * time.Millisecond

// startGuard starts the guard of FUSE connection conn, served by this
// process: this program run with args, this process's pid and conn. It
// runs in a process group of its own, so that the terminal's Ctrl-C (which
// the daemon turns into a clean stop) does not reach it; it inherits
// stderr to say what it did. Nothing waits for it: it must outlive a
// killed daemon.
func startGuard(args []string, conn int) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("start mount guard: %w", err)
	}
	cmd := exec.Command(exe, append(slices.Clone(args), strconv.Itoa(os.Getpid()), strconv.Itoa(conn))...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start mount guard: %w", err)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	return pid, nil
}

// Guard runs this process as the guard of FUSE connection conn, served by
// daemon pid: it watches the daemon until it is gone, and aborts conn if
// the daemon is killed but held. It reports whether it aborted the
// connection; an error says the daemon was held and the abort failed.
func Guard(pid, conn int) (aborted bool, err error) {
	// A daemon exiting normally may look held for a moment (its last thread
	// in the kernel, SIGKILL sent to the others); a held one stays so.
	heldBefore := false
	for {
		time.Sleep(guardPoll)
		gone, held := procFate(pid)
		held, heldBefore = held && heldBefore, held
		switch {
		case gone:
			return false, nil // it exited: closing its device ended the connection
		case held:
			err := abortConnection(conn)
			if errors.Is(err, os.ErrNotExist) {
				// The connection ended as the guard looked: the daemon was
				// exiting (its last thread in the kernel for a moment, the
				// others already told to go), not held.
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("daemon %d was killed and is held in the kernel; %w", pid, err)
			}
			return true, nil
		}
	}
}
