package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/loopback"
	"github.com/scrfs/scrfs/internal/testutil"
)

// The tests here act as the other users of a shared node (issue 14): an
// unprivileged attacker, and an ordinary user whose daemon root must not
// steer. They need root (to become those users); the accounts are created
// when missing.

// account is a local user the tests act as.
type account struct {
	name     string
	uid, gid uint32
}

// testAccount returns the account name, creating it (no home, no shell) if
// it does not exist; it skips the test when that is impossible.
func testAccount(t *testing.T, name string) account {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as a second, unprivileged user")
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, err := exec.LookPath("useradd"); err != nil {
			t.Skip("useradd not found: cannot create a second user")
		}
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil && !strings.Contains(string(out), "already exists") {
			t.Skipf("useradd %s: %v: %s", name, err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Skipf("user %s: %v", name, err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return account{name: name, uid: uint32(uid), gid: uint32(gid)}
}

func (a account) cred() *syscall.Credential { return &syscall.Credential{Uid: a.uid, Gid: a.gid} }

// run runs a shell script as a and returns its output and error.
func (a account) run(t *testing.T, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.cred()}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// scrfs runs the scrfs CLI as a and returns stdout+stderr and the exit code.
func (a account) scrfs(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(scrfsBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.cred()}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "USER=" + a.name}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// sharedDir returns a fresh directory every user can reach: mode 1777 (like
// /dev/shm) if sticky, else 0755 and owned by owner.
func sharedDir(t *testing.T, sticky bool, owner *account) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "scrfs-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	mode := os.FileMode(0o755)
	if sticky {
		mode = 0o777 | os.ModeSticky
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	if owner != nil {
		if err := os.Chown(dir, int(owner.uid), int(owner.gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// userNode prepares a daemon run by a (mounting through fusermount3) with
// cache and control under base.
func userNode(t *testing.T, a account, base string, env ...string) *Node {
	t.Helper()
	requireFUSE(t)
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("fusermount3 not found (apt-get install fuse3): a daemon of an ordinary user mounts through it")
	}
	n := NewNode(t, append([]string{"SCRFS_PATHS_CACHE_BASE=" + base, "SCRFS_PATHS_CONTROL_BASE=" + base,
		"SCRFS_FUSE_MOUNT=fusermount", "USER=" + a.name, "HOME=/"}, env...)...)
	n.Mount = filepath.Join(sharedDir(t, false, &a), "mnt")
	if err := os.Mkdir(n.Mount, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(n.Mount, int(a.uid), int(a.gid))
	n.Cache, n.Control, n.Cred = base, base, a.cred()
	return n
}

// rootNode prepares a daemon run by root with cache and control under base.
func rootNode(t *testing.T, base string, env ...string) *Node {
	t.Helper()
	n := NewNode(t, append([]string{"SCRFS_PATHS_CACHE_BASE=" + base, "SCRFS_PATHS_CONTROL_BASE=" + base}, env...)...)
	n.Cache, n.Control = base, base
	return n
}

// TestTakeoverBeforeStartRefused: another user creates <base>/<user>/scrfs.<job>
// before the daemon starts, with the lock a link to the daemon user's file
// and a state.json naming ../../../victim. The daemon, run by root or by an
// ordinary user, refuses with exit code 7 and a message naming the
// directory, and neither the linked file nor the victim directory changes.
func TestTakeoverBeforeStartRefused(t *testing.T) {
	mallory := testAccount(t, "scrfs-e2e-mallory")
	alice := testAccount(t, "scrfs-e2e-alice")
	for _, tc := range []struct {
		who   string
		owner *account // the daemon's user; nil = root
	}{{"root", nil}, {"ordinary user", &alice}} {
		t.Run(tc.who, func(t *testing.T) {
			base := sharedDir(t, true, nil)
			victims := sharedDir(t, false, tc.owner)
			victimFile, victimDir := filepath.Join(victims, "precious"), filepath.Join(victims, "victim")
			os.WriteFile(victimFile, []byte("the daemon user's file"), 0o600)
			os.MkdirAll(filepath.Join(victimDir, "data"), 0o700)
			var n *Node
			name := "root"
			if tc.owner != nil {
				n, name = userNode(t, *tc.owner, base), tc.owner.name
				for _, p := range []string{victimFile, victimDir, filepath.Join(victimDir, "data")} {
					os.Chown(p, int(tc.owner.uid), int(tc.owner.gid))
				}
			} else {
				requireFUSE(t)
				n = rootNode(t, base)
			}
			job := filepath.Join(base, name, "scrfs.e2e")
			rel, _ := filepath.Rel(job, victimDir)
			state, _ := json.Marshal(map[string]any{"version": 1, "next_id": 2, "datasets": []map[string]any{
				{"id": 1, "name": rel, "kind": "dir", "root": rel, "state": "writing", "created": time.Now()}}})
			if out, err := mallory.run(t, fmt.Sprintf("mkdir -p %[1]s && chmod 777 %[1]s %[2]s && ln -s %[3]s %[1]s/lock && printf '%%s' '%[4]s' > %[1]s/state.json",
				job, filepath.Dir(job), victimFile, state)); err != nil {
				t.Fatalf("planting as %s: %v: %s", mallory.name, err, out)
			}
			n.StartNoWait()
			err := n.WaitExit(30 * time.Second)
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
				t.Fatalf("daemon exit %v, want exit code 7\n%s", err, n.log.String())
			}
			n.WaitLog(time.Second, "refusing "+filepath.Join(base, name)+":", "belongs to uid "+strconv.Itoa(int(mallory.uid)), "have it removed")
			if b, _ := os.ReadFile(victimFile); string(b) != "the daemon user's file" {
				t.Errorf("the lock's link target changed to %q", b)
			}
			if _, err := os.Stat(filepath.Join(victimDir, "data")); err != nil {
				t.Errorf("victim directory harmed: %v", err)
			}
			if mounted(n.Mount) {
				t.Error("mounted although it refused to start")
			}
		})
	}
}

// TestAttacksOnRunningDaemon: with the directories the daemon's own, another
// user can neither swap a completed dataset's directory before it is
// flushed nor move the control socket nor plant a link; the flush carries
// the application's bytes and the CLI still finds the daemon. The other
// user's CLI cannot use the daemon either.
func TestAttacksOnRunningDaemon(t *testing.T) {
	mallory := testAccount(t, "scrfs-e2e-mallory")
	requireFUSE(t)
	base, prefix := sharedDir(t, true, nil), t.TempDir()
	n := rootNode(t, base, "SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=0").Start()
	want := writeDataset(t, n, "ckpt.1", 1)
	cache, control := n.CacheDir(), n.ControlDir()
	for what, script := range map[string]string{
		"swap the dataset directory": fmt.Sprintf("mv %[1]s/ckpt.1 %[1]s/ckpt.old", cache),
		"plant a dataset directory":  fmt.Sprintf("mkdir %s/ckpt.2", cache),
		"replace a file":             fmt.Sprintf("echo evil > %s/ckpt.1/a.bin", cache),
		"move the control socket":    fmt.Sprintf("mv %s/control.sock %s/", control, base),
		"plant a link":               fmt.Sprintf("ln -s /etc/shadow %s/flush.json", control),
	} {
		if out, err := mallory.run(t, script); err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("%s as %s: %v: %q, want permission denied", what, mallory.name, err, out)
		}
	}
	// The other user's CLI refuses the root-owned control directory, and
	// changes nothing.
	if out, code := mallory.scrfs(t, "complete", "--control", control, "ckpt.1"); code == 0 || !strings.Contains(out, "permission denied") && !strings.Contains(out, "belongs to uid 0") {
		t.Errorf("scrfs complete as %s: exit %d: %s", mallory.name, code, out)
	}
	if out, errs, code := n.CLI("flush", "--wait", "ckpt.1"); code != 0 {
		t.Fatalf("scrfs flush --wait: exit %d: %s%s", code, out, errs)
	}
	sameSums(t, "flushed ckpt.1", treeSums(t, filepath.Join(prefix, "ckpt.1")), want)
	if st := n.Status(); !st.Node.Ready {
		t.Fatalf("status after the attacks: %+v", st.Node)
	}
}

// TestControlSocketOnlyForItsUser: the daemon answers only its own user
// (SO_PEERCRED). Another user is refused even where the socket's mode would
// let them in (here loosened by hand), and changes nothing; root is refused
// by an ordinary user's daemon unless control.allow_root.
func TestControlSocketOnlyForItsUser(t *testing.T) {
	mallory := testAccount(t, "scrfs-e2e-mallory")
	requireFUSE(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not found (apt-get install curl): it talks to the socket as another user")
	}
	base := sharedDir(t, true, nil)
	n := rootNode(t, base).Start()
	writeRandom(t, n.Path("ckpt.1", "f"), 1000, 1)
	control := n.ControlDir()
	sock := filepath.Join(control, "control.sock")
	for _, p := range []string{filepath.Dir(control), control} {
		os.Chmod(p, 0o755)
	}
	os.Chmod(sock, 0o666)
	for _, req := range [][]string{{"http://scrfs/v1/status"}, {"-X", "POST", "-d", `{"name":"ckpt.1"}`, "http://scrfs/v1/complete"}} {
		out, err := mallory.run(t, curl+" -s --unix-socket "+sock+" "+strings.Join(req, " "))
		if err != nil || !strings.Contains(out, fmt.Sprintf("uid %d may not use this daemon", mallory.uid)) {
			t.Fatalf("%v as %s: %v: %s", req, mallory.name, err, out)
		}
	}
	n.WaitLog(5*time.Second, "control request refused", fmt.Sprintf("uid=%d", mallory.uid))
	if d := n.Dataset("ckpt.1"); d == nil || d.State != "writing" {
		t.Fatalf("ckpt.1 after the refused complete: %+v", d)
	}

	t.Run("root and an ordinary user's daemon", func(t *testing.T) {
		alice := testAccount(t, "scrfs-e2e-alice")
		if fi, err := os.Stat("/dev/fuse"); err != nil || fi.Mode().Perm()&0o006 != 0o006 {
			t.Skip("/dev/fuse is not open to ordinary users here (mode 0666 is the fuse3 default): no daemon of theirs can mount")
		}
		base := sharedDir(t, true, nil)
		n := userNode(t, alice, base).Start()
		control := filepath.Join(base, alice.name, "scrfs.e2e")
		if out, code := alice.scrfs(t, "status", "--control", control); code != 0 {
			t.Fatalf("scrfs status as the daemon's user: exit %d: %s", code, out)
		}
		out, errs, code := n.CLI("status", "--control", control)
		if code != 1 || !strings.Contains(errs, "uid 0 may not use this daemon") || !strings.Contains(errs, "control.allow_root") || out != "" {
			t.Fatalf("scrfs status as root: exit %d: %s%s", code, out, errs)
		}
		if out, code := mallory.scrfs(t, "status", "--control", control); code == 0 {
			t.Fatalf("scrfs status as %s: exit 0: %s", mallory.name, out)
		}
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
		n.Env = append(n.Env, "SCRFS_CONTROL_ALLOW_ROOT=true")
		n.Start()
		if out, errs, code := n.CLI("status", "--control", control); code != 0 {
			t.Fatalf("scrfs status as root with control.allow_root: exit %d: %s%s", code, out, errs)
		}
	})
}

// TestPprofClosedByDefault: the metrics endpoint serves no profiles unless
// metrics.pprof is set.
func TestPprofClosedByDefault(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want int
	}{{nil, http.StatusNotFound}, {[]string{"SCRFS_METRICS_PPROF=true"}, http.StatusOK}} {
		n := NewNode(t, append([]string{"SCRFS_METRICS_LISTEN=127.0.0.1:0"}, tc.env...)...).Start()
		addr := n.Status().Node.Metrics
		for path, want := range map[string]int{"/debug/pprof/": tc.want, "/debug/pprof/goroutine?debug=1": tc.want, "/metrics": http.StatusOK} {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%v: GET %s: %s, want %d", tc.env, path, resp.Status, want)
			}
		}
		n.Stop()
	}
}

// TestPeerFloodWhileNodeRestarts: a few thousand connections from one
// address flood node 0's peer port (half of them idle, holding a handshake
// slot each until the IO timeout) while node 1 is killed and restarted:
// node 1 links to node 0 within its connect timeout, and node 0's log holds
// a bounded number of lines about the flood, with a summary.
func TestPeerFloodWhileNodeRestarts(t *testing.T) {
	const connectTimeout = 10 * time.Second // NewCluster's cluster.connect_timeout
	const floodConns = 3000
	c := NewCluster(t, 2).Start()
	c.WaitAll(30*time.Second, "link to node", "up")
	flooder := loopback.IP(99)
	target := c.Addrs[0]

	var (
		made    atomic.Int64
		mu      sync.Mutex
		holding []net.Conn
		wg      sync.WaitGroup
	)
	defer func() {
		mu.Lock()
		for _, conn := range holding {
			conn.Close()
		}
		mu.Unlock()
	}()
	for w := range 16 {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(flooder)}, Timeout: time.Second}
			for k := w; k < floodConns; k += 16 {
				conn, err := d.Dial("tcp", target)
				if err != nil {
					continue
				}
				made.Add(1)
				if k%2 == 0 {
					mu.Lock()
					holding = append(holding, conn)
					mu.Unlock()
					continue
				}
				conn.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
				conn.Close()
			}
		})
	}
	testutil.Eventually(t, 30*time.Second, "a quarter of the flood's connections made", func() bool { return made.Load() >= floodConns/4 })
	c.Nodes[1].Kill()
	restarted := time.Now()
	c.Nodes[1].StartNoWait()
	c.Nodes[1].WaitLog(connectTimeout, "link to node 0", "up")
	t.Logf("node 1 linked %v after its restart, %d flood connections so far", time.Since(restarted), made.Load())
	wg.Wait()

	// Node 0 writes its summary when it stops, at the latest.
	if err := c.Nodes[0].Stop(); err != nil {
		t.Fatal(err)
	}
	log := c.Nodes[0].log.String()
	if !strings.Contains(log, "not logged one by one") {
		t.Fatalf("no summary of the flood in node 0's log:\n%s", log)
	}
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "dropped connection") || strings.Contains(l, "refused connection") || strings.Contains(l, "peer port:") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 40 {
		t.Fatalf("%d log lines about %d flood connections:\n%s", len(lines), made.Load(), strings.Join(lines, "\n"))
	}
}
