package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/control"
	// The daemon runs as a separate binary built in TestMain; importing its
	// package makes go test's cache notice when the daemon changes.
	_ "github.com/scrfs/scrfs/daemon"
	"github.com/scrfs/scrfs/internal/testutil"
)

// scrfsBin is the scrfs binary built once for all tests.
var scrfsBin string

// prefixKey is the prefix key of the daemons the tests run as root, one
// for every test as a user has one: a later job fetches what an earlier
// one flushed. (Daemons of other users get keys of their own.)
var prefixKey string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "scrfs-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Tests run the binary as other users too (security_test.go).
	os.Chmod(dir, 0o755)
	scrfsBin = filepath.Join(dir, "scrfs")
	prefixKey = filepath.Join(dir, "prefix.key")
	build := exec.Command("go", "build", "-o", scrfsBin, "../cmd/scrfs")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building scrfs:", err)
		os.Exit(1)
	}
	code := testutil.LeakCheck(m.Run(), "scrfs/e2e.")
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireFUSE skips a test that needs a kernel FUSE mount where none can be
// made, saying why.
func requireFUSE(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real daemons with FUSE mounts; skipped in -short mode (the static checks of docs, dashboard and scripts still run)")
	}
	testutil.RequireFUSE(t)
}

// Node is one scrfs daemon running as a separate process.
type Node struct {
	t       *testing.T
	Mount   string
	Cache   string // cache base
	Control string // control base
	Env     []string
	Args    []string            // extra mount arguments
	Cred    *syscall.Credential // run the daemon as this user; nil: as the test
	// Job is the job's node list and this node's index in it, when the
	// job runs on another node list than the cluster's (jobOn).
	Job []string

	// LogFile, when set, receives every run's log if the test fails,
	// instead of the test's output (a long test's logs are too big for it).
	LogFile string

	cmd    *exec.Cmd
	ctlMu  sync.Mutex
	ctl    *control.Client // the control socket's client, made once per control directory
	ctlDir string
	log    *logWatch   // the current run's log
	past   []*logWatch // earlier runs' logs, oldest first
	exited chan struct{}
	err    *error // the run's exit status, valid once exited is closed
	clean  bool   // the cleanup is registered
	// held is the exit of a killed run the kernel still holds (see Kill);
	// the next run must free it.
	held chan struct{}
}

// NewNode prepares a daemon with its own mountpoint, cache and control
// directories under a temp dir, and no metrics endpoint unless asked.
func NewNode(t *testing.T, env ...string) *Node {
	t.Helper()
	requireFUSE(t)
	base := t.TempDir()
	n := &Node{
		t:       t,
		Mount:   filepath.Join(base, "mnt"),
		Cache:   filepath.Join(base, "cache"),
		Control: filepath.Join(base, "control"),
	}
	n.Env = append([]string{
		"SCRFS_PATHS_CACHE_BASE=" + n.Cache,
		"SCRFS_PATHS_CONTROL_BASE=" + n.Control,
		"SCRFS_METRICS_LISTEN=",
		"SCRFS_JOB_ID=e2e",
		"SCRFS_LOG_LEVEL=debug",
		"SCRFS_PREFIX_KEY_FILE=" + prefixKey,
	}, env...)
	return n
}

// Start runs the daemon and waits until it reports ready.
func (n *Node) Start() *Node {
	n.t.Helper()
	n.StartNoWait()
	n.WaitReady(30 * time.Second)
	return n
}

// StartNoWait runs the daemon without waiting for it to be ready.
func (n *Node) StartNoWait() {
	n.t.Helper()
	args := append([]string{"mount"}, n.Args...)
	n.cmd = exec.Command(scrfsBin, append(args, n.Mount)...)
	n.cmd.Env = slices.Concat(os.Environ(), n.Env, n.Job)
	if n.Cred != nil {
		n.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: n.Cred}
	}
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	if n.log != nil {
		n.past = append(n.past, n.log)
	}
	n.log = newLogWatch()
	n.exited = make(chan struct{})
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	// The run's own cmd, log and channel: a killed run the kernel holds
	// (see Kill) may end after the next one started.
	cmd, lw, exited, errp := n.cmd, n.log, n.exited, new(error)
	n.err = errp
	go func() {
		lw.consume(stderr)
		*errp = cmd.Wait()
		close(exited)
	}()
	// Once per node, however often it restarts: the cleanup stops the
	// current run and shows every run's log once.
	if !n.clean {
		n.clean = true
		n.t.Cleanup(n.cleanup)
	}
}

func (n *Node) cleanup() {
	if n.held != nil {
		// Free it as an operator would: start the daemon again.
		n.StartNoWait()
		n.waitFreed()
	}
	select {
	case <-n.exited:
	default:
		n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.exited:
		case <-time.After(20 * time.Second):
			n.cmd.Process.Kill()
			<-n.exited
		}
	}
	// A killed daemon leaves its mount behind: detach it so TempDir's
	// cleanup can remove the directory.
	syscall.Unmount(n.Mount, syscall.MNT_DETACH)
	if !n.t.Failed() {
		return
	}
	if n.LogFile == "" {
		n.t.Logf("daemon log (%s):\n%s", n.Mount, n.Logs())
		return
	}
	if err := os.WriteFile(n.LogFile, []byte(n.Logs()), 0o644); err != nil {
		n.t.Logf("daemon log (%s) not written: %v", n.Mount, err)
		return
	}
	n.t.Logf("daemon log (%s) in %s", n.Mount, n.LogFile)
}

// Logs returns the log of every run of the daemon, oldest first.
func (n *Node) Logs() string {
	var b strings.Builder
	for i, w := range append(slices.Clone(n.past), n.log) {
		if len(n.past) > 0 {
			fmt.Fprintf(&b, "--- run %d ---\n", i+1)
		}
		b.WriteString(w.String())
		b.WriteString("\n")
	}
	return b.String()
}

// Kill sends SIGKILL and waits for the process to be gone, as a crash.
// One killed while a thread of it told the kernel to drop a cached name,
// which waits for the directory an application's request holds, is held
// by the kernel until its connection is aborted (mount.RecoverKilled): Kill
// returns, and the next start of the node must free it. A process still
// there a minute later for any other reason is stuck: the test fails with
// its threads' kernel stacks.
func (n *Node) Kill() {
	n.t.Helper()
	n.cmd.Process.Kill()
	pid := n.cmd.Process.Pid
	select {
	case <-n.exited:
		return
	case <-time.After(5 * time.Second):
	}
	if stacks := kernelStacks(pid); strings.Contains(stacks, "fuse_reverse_inval_entry") {
		n.t.Logf("daemon %d (%s) killed while the kernel held it in an entry invalidation; its next start must free it", pid, n.Mount)
		n.held = n.exited
		return
	}
	select {
	case <-n.exited:
	case <-time.After(55 * time.Second):
		n.t.Fatalf("HANG: daemon %d (%s) still there a minute after SIGKILL:\n%s", pid, n.Mount, kernelStacks(pid))
	}
}

// kernelStacks describes where a process's threads are in the kernel.
func kernelStacks(pid int) string {
	var b strings.Builder
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		stat, _ := os.ReadFile(filepath.Join(task, "stat"))
		wchan, _ := os.ReadFile(filepath.Join(task, "wchan"))
		stack, _ := os.ReadFile(filepath.Join(task, "stack"))
		fmt.Fprintf(&b, "%s wchan=%s\n%s\n", strings.TrimSpace(string(stat)), wchan, stack)
	}
	return b.String()
}

// Stop sends SIGTERM and returns the daemon's exit error once it is gone.
func (n *Node) Stop() error {
	n.t.Helper()
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		n.t.Fatal("daemon did not exit within 30s of SIGTERM")
	}
	return *n.err
}

// WaitExit waits for a daemon that is expected to exit on its own.
func (n *Node) WaitExit(timeout time.Duration) error {
	n.t.Helper()
	select {
	case <-n.exited:
		return *n.err
	case <-time.After(timeout):
		n.t.Fatalf("daemon still running after %v", timeout)
		return nil
	}
}

// WaitLog waits until a daemon log line contains all of parts.
func (n *Node) WaitLog(timeout time.Duration, parts ...string) string {
	n.t.Helper()
	line, ok := n.log.wait(timeout, n.exited, parts...)
	if !ok {
		n.t.Fatalf("no log line with %q within %v (daemon exited: %v)\n%s", parts, timeout, n.hasExited(), n.log.String())
	}
	return line
}

func (n *Node) hasExited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// Path returns a path inside the mount.
func (n *Node) Path(rel ...string) string { return filepath.Join(append([]string{n.Mount}, rel...)...) }

// CacheDir returns the job's cache directory.
func (n *Node) CacheDir(rel ...string) string {
	return filepath.Join(append([]string{n.Cache, currentUser(), "scrfs.e2e"}, rel...)...)
}

// ControlDir returns the job's control directory.
func (n *Node) ControlDir() string { return filepath.Join(n.Control, currentUser(), "scrfs.e2e") }

// CLI runs a scrfs command against this daemon and returns its stdout,
// stderr and exit code.
func (n *Node) CLI(args ...string) (string, string, int) {
	n.t.Helper()
	out, errs, code, err := n.CLIWithin(0, args...)
	if err != nil {
		n.t.Fatal(err)
	}
	return out, errs, code
}

// CLIWithin is CLI bounded by timeout (0: unbounded): a command still
// running then is killed and reported as an error, as is one that could
// not run at all.
func (n *Node) CLIWithin(timeout time.Duration, args ...string) (string, string, int, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, scrfsBin, args...)
	cmd.Env = append(append(os.Environ(), n.Env...), "SCRFS_CONTROL="+n.ControlDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String(), errb.String(), -1, fmt.Errorf("scrfs %s: no answer within %v", strings.Join(args, " "), timeout)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode(), nil
	}
	return out.String(), errb.String(), 0, err
}

// Status returns `scrfs status --json`.
func (n *Node) Status() control.Status {
	n.t.Helper()
	out, errs, code := n.CLI("status", "--json")
	if code != 0 {
		n.t.Fatalf("scrfs status: exit %d: %s", code, errs)
	}
	var st control.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		n.t.Fatalf("status JSON: %v\n%s", err, out)
	}
	return st
}

// Dataset returns a dataset's status entry, or nil.
func (n *Node) Dataset(name string) *control.Dataset {
	n.t.Helper()
	st := n.Status()
	for i := range st.Datasets {
		if st.Datasets[i].Name == name {
			return &st.Datasets[i]
		}
	}
	return nil
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" && os.Geteuid() != 0 {
		return u
	}
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		return fmt.Sprint(os.Getuid())
	}
	return strings.TrimSpace(string(out))
}

// logWatch collects a daemon's log lines and lets tests wait for one.
type logWatch struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced whenever a line arrives
}

func newLogWatch() *logWatch { return &logWatch{changed: make(chan struct{})} }

func (w *logWatch) consume(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		w.mu.Lock()
		w.lines = append(w.lines, sc.Text())
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
	}
}

// wait returns the first line (from the start of the log) containing all
// parts, blocking until one arrives, the process exits, or timeout.
func (w *logWatch) wait(timeout time.Duration, exited <-chan struct{}, parts ...string) (string, bool) {
	return w.waitNth(timeout, exited, 1, parts...)
}

// waitNth returns the nth line (from the start of the log) containing all
// parts, blocking until it arrives, the process exits, or timeout.
func (w *logWatch) waitNth(timeout time.Duration, exited <-chan struct{}, nth int, parts ...string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seen, found := 0, 0
	for {
		w.mu.Lock()
		for ; seen < len(w.lines); seen++ {
			if containsAll(w.lines[seen], parts) {
				if found++; found == nth {
					line := w.lines[seen]
					w.mu.Unlock()
					return line, true
				}
			}
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-exited:
			// Drain what the process wrote before it exited.
			w.mu.Lock()
			done := seen == len(w.lines)
			w.mu.Unlock()
			if done {
				return "", false
			}
		case <-ctx.Done():
			return "", false
		}
	}
}

// count returns how many lines contain all parts.
func (w *logWatch) count(parts ...string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		if containsAll(l, parts) {
			n++
		}
	}
	return n
}

// tail returns the last n lines.
func (w *logWatch) tail(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.lines[max(0, len(w.lines)-n):])
}

func (w *logWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// must fails the test on an error the test did not expect.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
