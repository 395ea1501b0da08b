package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

const guidePath = "../docs/guide.md"

// docBlock is one fenced shell block of a document, with the name its
// marker comment gives it.
type docBlock struct {
	name, text string
}

// markedBlocks returns the ```sh (or ```bash) blocks of doc that follow a comment
// <!-- PREFIX:NAME --> (blank lines between are allowed), in order.
func markedBlocks(t *testing.T, doc []byte, prefix string) []docBlock {
	t.Helper()
	var out []docBlock
	lines := strings.Split(string(doc), "\n")
	marker := regexp.MustCompile(`^<!-- ` + regexp.QuoteMeta(prefix) + `:([\w-]+) -->$`)
	for i := 0; i < len(lines); i++ {
		m := marker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j == len(lines) || (strings.TrimSpace(lines[j]) != "```sh" && strings.TrimSpace(lines[j]) != "```bash") {
			t.Fatalf("line %d: %s is not followed by a ```sh or ```bash block", i+1, lines[i])
		}
		var body []string
		for j++; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			body = append(body, lines[j])
		}
		out = append(out, docBlock{name: m[1], text: strings.Join(body, "\n")})
		i = j
	}
	return out
}

// shell is one bash process fed a document's blocks as a user would type
// them, with its output watched.
type shell struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *logWatch // stdout
	errs   *logWatch // stderr: the commands' errors and the daemon's log
	exited chan struct{}
}

func startShell(t *testing.T, dir string, env []string) *shell {
	t.Helper()
	sh := &shell{t: t, out: newLogWatch(), errs: newLogWatch(), exited: make(chan struct{})}
	sh.cmd = exec.Command("bash")
	sh.cmd.Dir, sh.cmd.Env = dir, env
	// Its own process group, so cleanup reaches the background daemons.
	sh.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if sh.stdin, err = sh.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := sh.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := sh.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sh.errs.consume(stderr); close(done) }()
	go func() {
		sh.out.consume(stdout)
		<-done
		sh.cmd.Wait()
		close(sh.exited)
	}()
	t.Cleanup(func() {
		// Stop what the blocks left running (nothing, if they all ran).
		fmt.Fprintln(sh.stdin, "kill $(jobs -p) 2>/dev/null; wait")
		sh.stdin.Close()
		select {
		case <-sh.exited:
		case <-time.After(20 * time.Second):
			syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-sh.exited:
			case <-time.After(10 * time.Second):
				syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
				<-sh.exited
			}
		}
		if t.Failed() {
			t.Logf("shell stdout:\n%s\nshell stderr:\n%s", sh.out.String(), sh.errs.String())
		}
	})
	return sh
}

// run types a block into the shell and waits until it has run. It returns
// what the block printed on stdout and the exit status of its last command.
func (sh *shell) run(b docBlock, timeout time.Duration) (string, int) {
	sh.t.Helper()
	sh.out.mu.Lock()
	from := len(sh.out.lines)
	sh.out.mu.Unlock()
	done := "@@block " + b.name + " done, status"
	if _, err := fmt.Fprintf(sh.stdin, "%s\necho \"%s $?\"\n", b.text, done); err != nil {
		sh.t.Fatalf("block %s: %v", b.name, err)
	}
	line, ok := sh.out.wait(timeout, sh.exited, done)
	if !ok {
		sh.t.Fatalf("block %s did not finish within %v:\n%s", b.name, timeout, b.text)
	}
	var code int
	if _, err := fmt.Sscanf(strings.TrimPrefix(line, done), "%d", &code); err != nil {
		sh.t.Fatalf("block %s: unreadable exit status %q: %v", b.name, line, err)
	}
	sh.out.mu.Lock()
	defer sh.out.mu.Unlock()
	var out []string
	for _, l := range sh.out.lines[from:] {
		if l == line {
			break
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n"), code
}

// awaitErr waits for a line on the shell's stderr (the daemon's log).
func (sh *shell) awaitErr(timeout time.Duration, parts ...string) {
	sh.t.Helper()
	if _, ok := sh.errs.wait(timeout, sh.exited, parts...); !ok {
		sh.t.Fatalf("no line with %q on stderr within %v", parts, timeout)
	}
}

// TestGuideQuickStart runs the quick start of docs/guide.md verbatim in one
// bash, block by block, against a real daemon, and checks what the guide
// promises after each block. Only the environment differs from a user's:
// scrfs on PATH, cache and control directories in the test's temp dir, no
// metrics endpoint.
func TestGuideQuickStart(t *testing.T) {
	requireFUSE(t)
	requireTool(t, "bash", "bash")
	doc, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := markedBlocks(t, doc, "quickstart")
	var names []string
	for _, b := range blocks {
		names = append(names, b.name)
	}
	if want := []string{"start", "write", "look", "flush", "restart", "stop"}; !slices.Equal(names, want) {
		t.Fatalf("quick-start blocks %v, want %v", names, want)
	}

	base := t.TempDir()
	work := filepath.Join(base, "work")
	cacheBase, controlBase := filepath.Join(base, "cache"), filepath.Join(base, "control")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SCRFS_") && !strings.HasPrefix(e, "SLURM_") && !strings.HasPrefix(e, "PATH=") {
			env = append(env, e)
		}
	}
	env = append(env,
		"PATH="+filepath.Dir(scrfsBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SCRFS_PATHS_CACHE_BASE="+cacheBase, "SCRFS_PATHS_CONTROL_BASE="+controlBase,
		"SCRFS_METRICS_LISTEN=")
	cacheDir := filepath.Join(cacheBase, currentUser(), "scrfs.local", "ckpt.1")
	mnt, pfs := filepath.Join(work, "scr"), filepath.Join(work, "pfs")
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	sh := startShell(t, work, env)
	const blockTimeout = 60 * time.Second

	// start: the daemon runs in the background and is ready.
	out, code := sh.run(blocks[0], blockTimeout)
	if code != 0 || !strings.Contains(out, "(ready, data path:") || !strings.Contains(out, "job local") {
		t.Fatalf("start: status %d:\n%s", code, out)
	}
	sh.awaitErr(10*time.Second, "scrfs ready", "mountpoint="+mnt)

	// write: "a moment later" the daemon logs the completion.
	if out, code := sh.run(blocks[1], blockTimeout); code != 0 {
		t.Fatalf("write: status %d:\n%s", code, out)
	}
	sh.awaitErr(10*time.Second, "dataset complete", "dataset=ckpt.1", "files=3", "bytes=16777223")

	// look: complete, three files, and appending is refused.
	out, code = sh.run(blocks[2], blockTimeout)
	if !regexp.MustCompile(`(?m)^ckpt\.1\s+complete\s+3\s+16\.0 MiB`).MatchString(out) {
		t.Errorf("look: status shows no complete ckpt.1 with 3 files of 16 MiB:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)\s16777216 .*rank_0\.bin$`).MatchString(out) || !strings.Contains(out, "COMPLETE") {
		t.Errorf("look: ls -l does not show the checkpoint:\n%s", out)
	}
	if code == 0 {
		t.Error("look: appending to a complete dataset succeeded")
	}
	sh.awaitErr(time.Second, "meta.txt: Read-only file system")
	if b, _ := os.ReadFile(filepath.Join(mnt, "ckpt.1", "meta.txt")); string(b) != "step 1\n" {
		t.Errorf("meta.txt after the refused append: %q", b)
	}

	// flush: the tree lands in pfs, byte-identical, and the index lists it.
	out, code = sh.run(blocks[3], blockTimeout)
	if code != 0 || !strings.Contains(out, "ckpt.1 flushed to "+filepath.Join(pfs, "ckpt.1")) {
		t.Fatalf("flush: status %d:\n%s", code, out)
	}
	if !regexp.MustCompile(`(?m)^ckpt\.1\s+complete\s+16\.0 MiB\s+3\s+1\s`).MatchString(out) {
		t.Errorf("flush: scrfs list does not show ckpt.1 complete:\n%s", out)
	}
	sameSums(t, "the flushed checkpoint", treeSums(t, filepath.Join(pfs, "ckpt.1")), treeSums(t, filepath.Join(mnt, "ckpt.1")))
	if sums := treeSums(t, filepath.Join(pfs, "ckpt.1")); len(sums) != 3 {
		t.Errorf("pfs/ckpt.1 holds %v", sums)
	}

	// restart: the checkpoint is served from the cache after a restart.
	out, code = sh.run(blocks[4], blockTimeout)
	if code != 0 || !strings.Contains(out, "same") {
		t.Fatalf("restart: status %d:\n%s", code, out)
	}
	sh.awaitErr(time.Second, "dataset recovered", "dataset=ckpt.1", "state=complete")

	// stop: unmounted cleanly, the cache kept.
	if out, code := sh.run(blocks[5], blockTimeout); code != 0 {
		t.Fatalf("stop: status %d:\n%s", code, out)
	}
	if n := sh.errs.count("unmounted", "mountpoint="+mnt); n != 2 {
		t.Errorf("%d clean unmounts logged, want 2", n)
	}
	if mounted(mnt) {
		t.Error("scr is still mounted after the stop block")
	}
	if _, err := os.Stat(filepath.Join(cacheDir, "rank_0.bin")); err != nil {
		t.Errorf("cache after the stop: %v", err)
	}
	if n := sh.errs.count("level=WARN") + sh.errs.count("level=ERROR"); n != 0 {
		t.Errorf("the daemon logged %d warnings or errors during the quick start", n)
	}
}

// checkMetricsDocumented checks the guide's metrics table against a live
// exposition: every scrfs family is documented, and every metric the guide
// names exists.
func checkMetricsDocumented(t *testing.T, families map[string]*dto.MetricFamily) {
	doc, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(scrfs_[a-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	exported := exportedNames(t, families)
	for name := range families {
		if strings.HasPrefix(name, "scrfs_") && !strings.HasPrefix(name, "scrfs_process_") && !documented[name] {
			t.Errorf("docs/guide.md does not document %s", name)
		}
	}
	for name := range documented {
		if families[name] == nil && !exported[name] {
			t.Errorf("docs/guide.md names %s, which scrfs does not export", name)
		}
	}
}
