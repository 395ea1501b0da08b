package mount

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A daemon killed (SIGKILL) while one of its threads was telling the
// kernel to drop a cached name (the node tree's forget and appeared: a
// FUSE_NOTIFY_INVAL_ENTRY write, which takes the directory's lock) can be
// held in the kernel for good: an application's request in that directory
// holds the lock while it waits for an answer the dead daemon never sends,
// and the kernel does not abort the connection while that thread keeps
// the device open. The process never exits, the application and the mount
// hang. Aborting the connection (fusectl's abort file) lets both go on;
// the mount's guard does it at once (guard.go), or else the job's next
// daemon (RecoverKilled, and prepareMountpoint for a mount it finds
// unanswered).

// fusectlDir is where the fusectl file system lists FUSE connections.
const fusectlDir = "/sys/fs/fuse/connections"

// mountInfo is one mount as /proc/self/mountinfo lists it.
type mountInfo struct {
	dir, fstype, source string
	conn                int // the device's minor number: the connection's name in fusectl
}

// findMounts returns the mounts of /proc/self/mountinfo that match accepts.
func findMounts(match func(mountInfo) bool) []mountInfo {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		m := mountInfo{dir: unescapeMountinfo(fields[4])}
		if _, minor, ok := strings.Cut(fields[2], ":"); ok {
			m.conn, _ = strconv.Atoi(minor)
		}
		for i, fld := range fields {
			if fld == "-" && i+2 < len(fields) {
				m.fstype, m.source = fields[i+1], unescapeMountinfo(fields[i+2])
				break
			}
		}
		if match(m) {
			out = append(out, m)
		}
	}
	return out
}

// killedButHeld reports whether process pid was killed and cannot exit:
// its main thread is gone (a zombie) while another thread is still there,
// or its main thread, killed, still waits in the kernel (see procFate).
func killedButHeld(pid int) bool {
	_, held := procFate(pid)
	return held
}

// procFate reads how process pid stands: gone (exited, or a zombie with
// no thread left), or killed but held; neither while it runs. Held has two
// faces: the main thread exited and another thread waits in the kernel, or
// the thread that waits is the main thread itself (Go may run the write of
// a notification on it), which then shows uninterruptible sleep (D) with
// SIGKILL pending. A daemon killed as it exits normally may show that for
// a moment too; aborting its connection then frees nothing it still needs.
func procFate(pid int) (gone, held bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true, false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 >= len(stat) {
		return false, false
	}
	switch stat[i+2] {
	case 'Z':
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
		return len(tasks) <= 1, len(tasks) > 1
	case 'D':
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		return err != nil, err == nil && killPending(status)
	}
	return false, false
}

// killPending reports whether a /proc/PID/status text shows SIGKILL
// pending, for the thread (SigPnd) or the process (ShdPnd).
func killPending(status []byte) bool {
	const sigkill = uint64(1) << (syscall.SIGKILL - 1)
	for line := range strings.Lines(string(status)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "SigPnd" && key != "ShdPnd") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(val), 16, 64); err == nil && mask&sigkill != 0 {
			return true
		}
	}
	return false
}

// abortConnection aborts FUSE connection conn: every request waiting for
// its daemon fails, and the daemon's device reads end. fusectl is mounted
// first if it is not (root only); its abort files belong to the mount's
// owner.
func abortConnection(conn int) error {
	abort := filepath.Join(fusectlDir, strconv.Itoa(conn), "abort")
	if _, err := os.Stat(abort); errors.Is(err, os.ErrNotExist) && os.Geteuid() == 0 {
		if err := syscall.Mount("fusectl", fusectlDir, "fusectl", 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("mount fusectl on %s: %w", fusectlDir, err)
		}
	}
	if err := os.WriteFile(abort, []byte("1"), 0); err != nil {
		return fmt.Errorf("abort FUSE connection %d (%s; mount fusectl there as root if it is missing): %w", conn, abort, err)
	}
	return nil
}

// RecoverKilled frees the job's mounts when pid, the daemon that holds its
// lock, was killed but is held in the kernel: it aborts the connection of
// every FUSE mount of cacheDir (the source every scrfs mount of that cache
// carries: Options.CacheDir) and waits, at most timeout, for pid to exit.
// It reports whether pid was such a daemon and has exited; an error says
// why it could not be freed.
func RecoverKilled(cacheDir string, pid int, timeout time.Duration, log *slog.Logger) (bool, error) {
	if pid <= 0 || !killedButHeld(pid) {
		return false, nil
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false, fmt.Errorf("watch killed daemon %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	ours := findMounts(func(m mountInfo) bool { return strings.HasPrefix(m.fstype, "fuse") && m.source == cacheDir })
	if len(ours) == 0 {
		return false, fmt.Errorf("daemon %d was killed but is held in the kernel, and no mount of %s is left to abort", pid, cacheDir)
	}
	for _, m := range ours {
		if err := abortConnection(m.conn); err != nil {
			return false, err
		}
		log.Warn("aborted the FUSE connection of a killed daemon held in the kernel", "pid", pid, "mountpoint", m.dir, "connection", m.conn)
	}
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for deadline := time.Now().Add(timeout); ; {
		left := time.Until(deadline)
		if left <= 0 {
			return false, fmt.Errorf("killed daemon %d still there %v after its connections were aborted", pid, timeout)
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if n > 0 {
			return true, nil
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return false, fmt.Errorf("wait for killed daemon %d: %w", pid, err)
		}
	}
}
