package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const slurmPath = "../docs/slurm.md"

// runLayout runs `scrfs layout --json` with exactly env (plus PATH and
// HOME), as a daemon started by srun would see its environment.
func runLayout(t *testing.T, env ...string) (self int, addrs []string, source, errs string, code int) {
	t.Helper()
	cmd := exec.Command(scrfsBin, "layout", "--json")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		return 0, nil, "", stderr.String(), code
	}
	var l struct {
		Self   int      `json:"self"`
		Addrs  []string `json:"addrs"`
		Source string   `json:"source"`
	}
	if err := json.Unmarshal(out.Bytes(), &l); err != nil {
		t.Fatalf("layout --json: %v\n%s", err, out.String())
	}
	return l.Self, l.Addrs, l.Source, stderr.String(), 0
}

// TestSlurmNodelist: a daemon started by srun takes the job's nodes from
// SLURM_JOB_NODELIST in every compressed form and its index from
// SLURM_NODEID, through the same code the daemon runs (scrfs layout).
// layout/nodelist_test.go tests the expansion itself in detail.
func TestSlurmNodelist(t *testing.T) {
	for _, c := range []struct {
		nodelist string
		nodeid   int
		want     []string
	}{
		{"node[01-04,07]", 3, []string{"node01", "node02", "node03", "node04", "node07"}},
		{"a[1-2],b3", 2, []string{"a1", "a2", "b3"}},
		{"rack[1-2]-n[1-2]", 1, []string{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
		{"n[8-10]", 0, []string{"n8", "n9", "n10"}},
		{"gpu[008-010],login1", 3, []string{"gpu008", "gpu009", "gpu010", "login1"}},
	} {
		self, addrs, source, errs, code := runLayout(t,
			"SLURM_JOB_NODELIST="+c.nodelist, "SLURM_NODEID="+strconv.Itoa(c.nodeid), "SLURM_JOB_ID=77")
		var want []string
		for _, h := range c.want {
			want = append(want, h+":7411")
		}
		if code != 0 || self != c.nodeid || !slices.Equal(addrs, want) || source != "SLURM_JOB_NODELIST" {
			t.Errorf("SLURM_JOB_NODELIST=%s SLURM_NODEID=%d: exit %d, node %d of %v from %q, want node %d of %v\n%s",
				c.nodelist, c.nodeid, code, self, addrs, source, c.nodeid, want, errs)
		}
	}

	// The port comes from cluster.port; the index from the configuration
	// wins over Slurm's; an explicit node list wins over Slurm's.
	if _, addrs, _, errs, _ := runLayout(t, "SLURM_JOB_NODELIST=a[1-2]", "SLURM_NODEID=0", "SCRFS_CLUSTER_PORT=9000"); !slices.Equal(addrs, []string{"a1:9000", "a2:9000"}) {
		t.Errorf("cluster.port with Slurm: %v %s", addrs, errs)
	}
	if self, _, _, errs, _ := runLayout(t, "SLURM_JOB_NODELIST=a[1-3]", "SLURM_NODEID=0", "SCRFS_CLUSTER_NODE_INDEX=2"); self != 2 {
		t.Errorf("SCRFS_CLUSTER_NODE_INDEX=2 with SLURM_NODEID=0: node %d %s", self, errs)
	}
	if _, addrs, source, errs, _ := runLayout(t, "SLURM_JOB_NODELIST=a[1-3]", "SLURM_NODEID=1", "SCRFS_CLUSTER_NODES=x,y"); len(addrs) != 2 || source != "cluster.nodes" {
		t.Errorf("cluster.nodes with Slurm: %v from %q %s", addrs, source, errs)
	}

	// What cannot work is a configuration error that says why.
	for _, c := range []struct{ nodelist, nodeid, want string }{
		{"node[01-04", "0", "missing ']'"},
		{"node[01-04]", "4", "SLURM_NODEID=4 is outside the 4 node(s)"},
		{"node[01-04]", "two", `SLURM_NODEID="two" is not a number`},
	} {
		_, _, _, errs, code := runLayout(t, "SLURM_JOB_NODELIST="+c.nodelist, "SLURM_NODEID="+c.nodeid)
		if code != 3 || !strings.Contains(errs, c.want) {
			t.Errorf("SLURM_JOB_NODELIST=%s SLURM_NODEID=%s: exit %d: %s, want exit 3 saying %q", c.nodelist, c.nodeid, code, errs, c.want)
		}
	}
}

// fakeSrun stands in for srun on one node: it drops srun's options, and
// runs the command as task 0 of node 0 with --output's file, in place of
// itself so that signals reach the command as srun forwards them.
const fakeSrun = `#!/bin/bash
out=
while [[ $# -gt 0 && $1 == -* ]]; do
	case $1 in
	--output=*) out=${1#--output=} ;;
	--*=*|--overlap|--no-kill) ;;
	*) echo "fake srun: unexpected option $1" >&2; exit 2 ;;
	esac
	shift
done
export SLURM_NODEID=0 SLURM_PROCID=0
if [[ -n $out ]]; then
	out=${out//%j/$SLURM_JOB_ID}; out=${out//%n/0}; out=${out//%N/$(hostname -s)}
	exec "$@" >"$out" 2>&1
fi
exec "$@"
`

// fakeTrain stands in for a PyTorch job that saves with
// torch.distributed.checkpoint: each checkpoint is a directory of shard
// files and a .metadata written last, to .metadata.tmp and renamed. It
// keeps a copy of what it wrote outside the mount for the test.
const fakeTrain = `#!/usr/bin/env python3
import os, sys
ckdir = sys.argv[sys.argv.index("--checkpoint-dir") + 1]
for step in (100, 200):
    d = os.path.join(ckdir, "step_%d" % step)
    os.makedirs(d)
    for rank in range(2):
        data = os.urandom(300000 + rank)
        for root in (d, os.path.join("written", "step_%d" % step)):
            os.makedirs(root, exist_ok=True)
            with open(os.path.join(root, "__%d_0.distcp" % rank), "wb") as f:
                f.write(data)
    meta = b"metadata of step %d" % step
    with open(os.path.join("written", "step_%d" % step, ".metadata"), "wb") as f:
        f.write(meta)
    with open(os.path.join(d, ".metadata.tmp"), "wb") as f:
        f.write(meta)
    os.rename(os.path.join(d, ".metadata.tmp"), os.path.join(d, ".metadata"))
`

// TestSlurmJobScript runs the job script of docs/slurm.md verbatim on one
// node, with a stand-in srun and application: the daemon starts, becomes
// ready, the application's newest checkpoint completes by its .metadata
// marker and is flushed by the scavenge step, and the daemon unmounts and
// its cache is removed.
func TestSlurmJobScript(t *testing.T) {
	requireFUSE(t)
	requireTool(t, "bash", "bash")
	requireTool(t, "python3", "python3")
	doc, err := os.ReadFile(slurmPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := markedBlocks(t, doc, "slurm")
	if len(blocks) != 2 || blocks[0].name != "jobscript" {
		t.Fatalf("slurm.md blocks: %v", blocks)
	}
	work, bin, prefix := t.TempDir(), t.TempDir(), t.TempDir()
	for name, body := range map[string]string{
		filepath.Join(bin, "srun"):        fakeSrun,
		filepath.Join(work, "train.py"):   fakeTrain,
		filepath.Join(work, "job.sbatch"): blocks[0].text,
	} {
		if err := os.WriteFile(name, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	user := currentUser()
	job := fmt.Sprintf("e2e-slurm-%d", os.Getpid())
	mnt := "/tmp/scrfs-" + user + "-" + job
	cache := filepath.Join("/dev/shm", user, "scrfs."+job)
	t.Cleanup(func() {
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		must(t, os.RemoveAll(mnt))
		must(t, os.RemoveAll(cache))
	})
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SCRFS_") && !strings.HasPrefix(e, "SLURM_") && !strings.HasPrefix(e, "PATH=") && !strings.HasPrefix(e, "USER=") {
			env = append(env, e)
		}
	}
	env = append(env,
		"PATH="+bin+string(os.PathListSeparator)+filepath.Dir(scrfsBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"USER="+user, "SLURM_JOB_ID="+job, "SLURM_JOB_NUM_NODES=1", "SLURM_JOB_NODELIST=localhost",
		"SLURM_NODEID=0", "SCRFS_PATHS_PREFIX="+prefix, "SCRFS_METRICS_LISTEN=",
		fmt.Sprintf("SCRFS_CLUSTER_PORT=%d", freePort(t, 1)))
	cmd := exec.Command("bash", "job.sbatch")
	cmd.Dir, cmd.Env = work, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the job script did not finish within 2 minutes:\n%s", out.String())
	}
	logPath := filepath.Join(work, "scrfs-"+job+"-node0.log")
	log, _ := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("job script: %v\n%s\ndaemon log:\n%s", err, out.String(), log)
	}
	for _, want := range [][]string{
		{"scrfs ready", "mountpoint=" + mnt},
		{"dataset complete", "dataset=step_200", `reason="marker .metadata"`},
		{"dataset flushed", "dataset=step_200"},
		{"unmounted", "mountpoint=" + mnt},
	} {
		found := false
		for _, l := range strings.Split(string(log), "\n") {
			found = found || containsAll(l, want)
		}
		if !found {
			t.Errorf("daemon log %s has no line with %q:\n%s", logPath, want, log)
		}
	}
	sameSums(t, "step_200 in the prefix", treeSums(t, filepath.Join(prefix, "step_200")),
		treeSums(t, filepath.Join(work, "written", "step_200")))
	if e := readPrefixIndex(t, prefix).entry(t, "step_200"); e.State != "complete" || e.Nodes != 1 {
		t.Errorf("index entry of step_200: %+v", e)
	}
	if mounted(mnt) {
		t.Error("the mount is still there after the job script")
	}
	if _, err := os.Stat(cache); !os.IsNotExist(err) {
		t.Errorf("the job's cache %s is still there: %v", cache, err)
	}
}

// TestSlurmScriptsParse checks the syntax of every job script in
// docs/slurm.md (the spare-node one needs a real Slurm to run).
func TestSlurmScriptsParse(t *testing.T) {
	requireTool(t, "bash", "bash")
	doc, err := os.ReadFile(slurmPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := markedBlocks(t, doc, "slurm")
	if len(blocks) < 2 {
		t.Fatalf("slurm.md has %d marked scripts", len(blocks))
	}
	for _, b := range blocks {
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(b.text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("script %s: bash -n: %v\n%s", b.name, err, out)
		}
		if !strings.HasPrefix(b.text, "#!/bin/bash\n#SBATCH") {
			t.Errorf("script %s does not start as a batch script", b.name)
		}
	}
}
