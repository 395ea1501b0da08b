package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/internal/testutil"
)

// Issue 29: while a checkpoint is written its namespace is job-wide, and a
// file written on several nodes is one file once the checkpoint completes.
// These are its acceptance tests, with plain shell tools here and MPI
// programs in mpiio_test.go.

// posixTimeout bounds one shell tool on the mounts (scaled): each takes
// milliseconds; one still running after this hangs.
const posixTimeout = 20 * time.Second

// posix runs a shell tool (mkdir, dd, mv, …) as a user would, bounded: one
// that hangs is killed and reported as a hang, naming the command.
func posix(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(posixTimeout))
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("HANG: %s: still running after %v, killed", strings.Join(args, " "), testutil.Scale(posixTimeout))
	}
	if err != nil {
		return string(out), fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// posixOK is posix for a command that must succeed.
func posixOK(t *testing.T, args ...string) string {
	t.Helper()
	out, err := posix(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sha256Of is the sha256 of a file, read with sha256sum.
func sha256Of(t *testing.T, path string) string {
	t.Helper()
	return strings.Fields(posixOK(t, "sha256sum", path))[0]
}

// both runs two shell tools at once and returns their errors.
func both(a, b []string) (errA, errB error) {
	var wg sync.WaitGroup
	wg.Go(func() { _, errA = posix(a...) })
	wg.Go(func() { _, errB = posix(b...) })
	wg.Wait()
	return errA, errB
}

// markComplete completes dataset ds with the marker, written on node 0.
func markComplete(t *testing.T, c *Cluster, ds string) {
	t.Helper()
	posixOK(t, "touch", c.Nodes[0].Path(ds, "COMPLETE"))
}

// settledStates are the states a completed dataset ends in.
var settledStates = []string{"protected", "degraded", "failed"}

// settled waits until dataset ds settles on every node of c and requires
// it in state want there; it returns each node's row.
func settled(t *testing.T, c *Cluster, ds, want string) []*control.Dataset {
	t.Helper()
	c.WaitState(60*time.Second, ds, settledStates...)
	rows := make([]*control.Dataset, len(c.Nodes))
	for i, n := range c.Nodes {
		rows[i] = n.WaitState(time.Second, ds, settledStates...)
		if rows[i].State != want {
			t.Fatalf("node %d: %s is %s (%s), want %s", i, ds, rows[i].State, rows[i].Reason, want)
		}
	}
	return rows
}

// exists tells whether path exists, by stat.
func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := posix("stat", path)
	if err != nil && strings.HasPrefix(err.Error(), "HANG") {
		t.Fatal(err)
	}
	return err == nil
}

// sharedJob is a job of 4 daemons for one rule of issue 29, with two
// contents to write, made outside the mounts.
type sharedJob struct {
	c      *Cluster
	a, b   string // the contents' files
	aBytes []byte
	bBytes []byte
}

// The dataset each rule writes.
const sharedDS = "ckpt.1"

// newSharedJob starts 4 daemons for test t (each rule its own: the
// cluster's waits fail the test they were made for) and makes node 0
// create the dataset's directory, as rank 0 of a job does.
func newSharedJob(t *testing.T) *sharedJob {
	t.Helper()
	j := &sharedJob{c: NewCluster(t, 4, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE").Start()}
	src := t.TempDir()
	j.a, j.b = filepath.Join(src, "a"), filepath.Join(src, "b")
	writeRandom(t, j.a, 4<<20, 1)
	writeRandom(t, j.b, 4<<20, 2)
	var err error
	j.aBytes, err = os.ReadFile(j.a)
	must(t, err)
	j.bBytes, err = os.ReadFile(j.b)
	must(t, err)
	posixOK(t, "mkdir", j.at(0))
	return j
}

// at is a path of the dataset through node i's mount.
func (j *sharedJob) at(i int, rel ...string) string {
	return j.c.Nodes[i].Path(append([]string{sharedDS}, rel...)...)
}

// complete completes the dataset with the marker and requires every node
// to settle it in state want; it returns each node's row.
func (j *sharedJob) complete(t *testing.T, want string) []*control.Dataset {
	t.Helper()
	markComplete(t, j.c, sharedDS)
	return settled(t, j.c, sharedDS, want)
}

// everywhere checks a file's bytes through every node's mount.
func (j *sharedJob) everywhere(t *testing.T, rel string, want []byte) {
	t.Helper()
	for i := range j.c.Nodes {
		if got := sha256Of(t, j.at(i, rel)); got != sha256hex(want) {
			t.Errorf("node %d reads %s as sha256 %.16s, want %.16s (%d bytes)", i, rel, got, sha256hex(want), len(want))
		}
	}
}

// TestSharedNamespace: issue 29's rules for the namespace while a
// checkpoint is written and for files several nodes write, with shell
// tools on 4 daemons.
func TestSharedNamespace(t *testing.T) {

	t.Run("directories made on one node", func(t *testing.T) {
		j := newSharedJob(t)
		posixOK(t, "mkdir", "-p", j.at(0, "step_100", "model"))
		// Every node has them before mkdir returned: no wait here.
		for i := range j.c.Nodes {
			for _, dir := range []string{"step_100", "step_100/model"} {
				if !exists(t, j.at(i, dir)) {
					t.Fatalf("node %d has no %s right after node 0's mkdir -p step_100/model returned", i, dir)
				}
			}
		}
		posixOK(t, "dd", "if="+j.a, "of="+j.at(1, "step_100", "__1_0.distcp"), "bs=64k", "count=1", "status=none")
		if ls := posixOK(t, "ls", j.at(3, "step_100")); !strings.Contains(ls, "__1_0.distcp") || !strings.Contains(ls, "model") {
			t.Fatalf("node 3 lists step_100, written on nodes 0 and 1, as:\n%s", ls)
		}
		// Two nodes make one directory at once: both succeed, one directory.
		if e2, e3 := both([]string{"mkdir", "-p", j.at(2, "step_200")}, []string{"mkdir", "-p", j.at(3, "step_200")}); e2 != nil || e3 != nil {
			t.Fatalf("mkdir -p of one directory on nodes 2 and 3 at once: %v; %v", e2, e3)
		}
		if ls := posixOK(t, "ls", j.at(0)); strings.Count(ls, "step_200") != 1 {
			t.Fatalf("node 0 lists the dataset as:\n%s", ls)
		}
		j.complete(t, "protected")
		j.everywhere(t, "step_100/__1_0.distcp", j.aBytes[:64<<10])
		for i := range j.c.Nodes {
			for _, dir := range []string{"step_100/model", "step_200"} {
				if !exists(t, j.at(i, dir)) {
					t.Errorf("node %d has no %s once the dataset completed", i, dir)
				}
			}
		}
	})

	t.Run("a file opened without O_CREAT on another node", func(t *testing.T) {
		j := newSharedJob(t)
		posixOK(t, "dd", "if="+j.a, "of="+j.at(0, "f"), "bs=64k", "count=1", "status=none")
		// Read-only, and write-only without O_CREAT (nocreat), on node 1.
		posixOK(t, "dd", "if="+j.at(1, "f"), "of=/dev/null", "bs=64k", "count=1", "status=none")
		posixOK(t, "dd", "if=/dev/null", "of="+j.at(1, "f"), "conv=notrunc,nocreat", "status=none")
		j.complete(t, "protected")
		j.everywhere(t, "f", j.aBytes[:64<<10])
	})

	t.Run("O_EXCL on two nodes at once", func(t *testing.T) {
		j := newSharedJob(t)
		for k := range 8 {
			name := fmt.Sprintf("lock.%d", k)
			// dd conv=excl opens with O_CREAT|O_EXCL.
			excl := func(i int) []string {
				return []string{"dd", "if=/dev/null", "of=" + j.at(i, name), "conv=excl", "status=none"}
			}
			e0, e1 := both(excl(0), excl(1))
			if (e0 == nil) == (e1 == nil) {
				t.Fatalf("%s created with O_EXCL on nodes 0 and 1 at once: node 0: %v; node 1: %v (want exactly one to win)", name, e0, e1)
			}
			for _, err := range []error{e0, e1} {
				if err != nil && !strings.Contains(err.Error(), "File exists") {
					t.Fatalf("the loser of the O_EXCL race on %s: %v, want EEXIST", name, err)
				}
			}
		}
	})

	t.Run("rename and unlink on other nodes", func(t *testing.T) {
		j := newSharedJob(t)
		posixOK(t, "dd", "if="+j.a, "of="+j.at(0, "a.tmp"), "bs=1M", "count=1", "status=none")
		posixOK(t, "mv", j.at(0, "a.tmp"), j.at(0, "a"))
		if !exists(t, j.at(2, "a")) || exists(t, j.at(2, "a.tmp")) {
			t.Fatalf("node 2 does not see node 0's rename of a.tmp to a")
		}
		// Node 1 renames node 0's file, node 3 removes another.
		posixOK(t, "mv", j.at(1, "a"), j.at(1, "b"))
		posixOK(t, "dd", "if="+j.b, "of="+j.at(0, "gone"), "bs=64k", "count=1", "status=none")
		posixOK(t, "rm", j.at(3, "gone"))
		if !exists(t, j.at(0, "b")) || exists(t, j.at(0, "a")) || exists(t, j.at(0, "gone")) {
			t.Fatalf("node 0 does not see node 1's rename of a to b or node 3's unlink of gone")
		}
		j.complete(t, "protected")
		j.everywhere(t, "b", j.aBytes[:1<<20])
		for i := range j.c.Nodes {
			for _, name := range []string{"a", "a.tmp", "gone"} {
				if exists(t, j.at(i, name)) {
					t.Errorf("node %d shows %s once the dataset completed", i, name)
				}
			}
		}
	})

	t.Run("a directory renamed with what every node wrote in it", func(t *testing.T) {
		j := newSharedJob(t)
		posixOK(t, "mkdir", j.at(0, "default.tmp"))
		for i := range j.c.Nodes {
			posixOK(t, "mkdir", j.at(i, "default.tmp", fmt.Sprintf("process_%d", i)))
			posixOK(t, "dd", "if="+j.a, "of="+j.at(i, "default.tmp", fmt.Sprintf("process_%d", i), "d"), "bs=64k", "count=1", "status=none")
		}
		// As Orbax commits an item once every process wrote its part.
		posixOK(t, "mv", j.at(0, "default.tmp"), j.at(0, "default"))
		for i := range j.c.Nodes {
			if exists(t, j.at(i, "default.tmp")) || !exists(t, j.at(i, "default", "process_3", "d")) {
				t.Fatalf("node %d does not show node 0's rename of default.tmp to default", i)
			}
		}
		j.complete(t, "protected")
		for i := range j.c.Nodes {
			j.everywhere(t, fmt.Sprintf("default/process_%d/d", i), j.aBytes[:64<<10])
		}
	})

	t.Run("two nodes write disjoint halves", func(t *testing.T) {
		j := newSharedJob(t)
		// As the reproduction: dd conv=notrunc on both nodes.
		posixOK(t, "dd", "if="+j.a, "of="+j.at(0, "h"), "bs=1M", "count=4", "conv=notrunc", "status=none")
		posixOK(t, "dd", "if="+j.b, "of="+j.at(1, "h"), "bs=1M", "count=4", "seek=4", "conv=notrunc", "status=none")
		for i, d := range j.complete(t, "protected") {
			if d.SharedFiles != 1 {
				t.Errorf("node %d: %d shared files, want 1 for a file written on two nodes", i, d.SharedFiles)
			}
		}
		j.everywhere(t, "h", append(slices.Clone(j.aBytes), j.bBytes...))
	})

	t.Run("overlapping ranges with the same bytes", func(t *testing.T) {
		j := newSharedJob(t)
		// Node 0 writes [0, 2 MiB) of a, node 1 [1 MiB, 3 MiB) of a.
		posixOK(t, "dd", "if="+j.a, "of="+j.at(0, "f"), "bs=1M", "count=2", "conv=notrunc", "status=none")
		posixOK(t, "dd", "if="+j.a, "of="+j.at(1, "f"), "bs=1M", "skip=1", "seek=1", "count=2", "conv=notrunc", "status=none")
		j.complete(t, "protected")
		j.everywhere(t, "f", j.aBytes[:3<<20])
	})

	t.Run("overlapping ranges with different bytes", func(t *testing.T) {
		j := newSharedJob(t)
		// Node 0 writes [0, 2 MiB) of a, node 1 b at [1 MiB, 3 MiB).
		posixOK(t, "dd", "if="+j.a, "of="+j.at(0, "clash.bin"), "bs=1M", "count=2", "conv=notrunc", "status=none")
		posixOK(t, "dd", "if="+j.b, "of="+j.at(1, "clash.bin"), "bs=1M", "seek=1", "count=2", "conv=notrunc", "status=none")
		for i, d := range j.complete(t, "failed") {
			if !strings.Contains(d.Reason, "clash.bin") || !namesOffset(d.Reason, 1<<20) {
				t.Errorf("node %d: failed with %q, want the reason to name clash.bin and the range from 1 MiB", i, d.Reason)
			}
			if exists(t, j.at(i)) {
				t.Errorf("node %d still shows the failed dataset", i)
			}
		}
	})
}

// namesOffset tells whether a reason names byte offset off in one of the
// ways a person would write it.
func namesOffset(reason string, off int64) bool {
	forms := []string{fmt.Sprint(off), fmt.Sprintf("%#x", off)}
	if off%(1<<20) == 0 {
		forms = append(forms, fmt.Sprintf("%dMiB", off>>20), fmt.Sprintf("%d MiB", off>>20))
	}
	return slices.ContainsFunc(forms, func(f string) bool { return strings.Contains(reason, f) })
}
