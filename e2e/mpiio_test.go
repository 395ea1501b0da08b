package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// Issue 29's MPI acceptance tests: MPI-IO and parallel HDF5 checkpoints,
// one shared file written by a rank on each of 4 daemons (mpi_test.go runs
// the jobs, mpi_reference_test.go has the cases and the reference runs),
// through completion, a node's loss, a flush and fetches on 4 and on 2
// nodes.

// mpiDS is the dataset the MPI tests write.
const mpiDS = "ckpt.1"

// mpiJobEnv configures the daemons of the MPI tests: XOR, completion by
// the marker, flushed to prefix only on demand.
func mpiJobEnv(prefix string) []string {
	return []string{"SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_PATHS_PREFIX=" + prefix, "SCRFS_FLUSH_EVERY=0", "SCRFS_RESTART_MEMBER_TIMEOUT=20s"}
}

// mountsOf lists the mounts of c's nodes, a rank on each.
func mountsOf(c *Cluster, nodes ...int) []string {
	var out []string
	for _, i := range nodes {
		out = append(out, c.Nodes[i].Mount)
	}
	return out
}

// TestMPISharedCheckpoint: the MPI-IO collective and strided writes and a
// parallel HDF5 checkpoint, a rank on each of 4 daemons, each file shared
// by all four. Once complete, every node reads each file byte-identical to
// the reference run's, and the programs read them back on 4 ranks and on 2;
// again after node 2 is lost (killed, wiped, rebuilt); flushed, the prefix
// holds each file once, identical, and h5dump reads the HDF5 file there;
// after every cache is wiped the job fetches them back on 4 nodes, and a
// job of 2 nodes does too.
func TestMPISharedCheckpoint(t *testing.T) {
	w := requireMPI(t)
	_, want := w.references(t)
	prefix := t.TempDir()
	c := NewCluster(t, 4, mpiJobEnv(prefix)...).Start()
	all := mountsOf(c, 0, 1, 2, 3)

	for _, k := range ckptCases {
		t.Run("write "+k.name, func(t *testing.T) {
			w.ok(t, "write "+k.name+" through the mounts", all, k.writeArgv(w, mpiDS)...)
		})
	}
	if t.Failed() {
		t.FailNow()
	}
	markComplete(t, c, mpiDS)
	for i, d := range settled(t, c, mpiDS, "protected") {
		if d.SharedFiles != len(ckptCases) {
			t.Errorf("node %d: %d shared files, want %d: each file is one file written by 4 nodes", i, d.SharedFiles, len(ckptCases))
		}
	}
	checkMPIFiles(t, "complete", c.Nodes, want)
	w.readBack(t, "complete", all)
	w.readBack(t, "complete, on nodes 2 and 3", mountsOf(c, 2, 3))

	// Node 2 is lost: killed, its cache wiped, a new daemon in its place.
	n := c.replace(t, 2, false)
	n.Start()
	n.WaitState(60*time.Second, mpiDS, "protected")
	checkMPIFiles(t, "node 2 rebuilt", []*Node{n}, want)
	w.readBack(t, "node 2 rebuilt", all)

	if out, errs, code, err := c.Nodes[0].CLIWithin(testutil.Scale(2*time.Minute), "flush", "--wait", mpiDS); err != nil || code != 0 {
		t.Fatalf("scrfs flush --wait %s: exit %d, %v: %s%s", mpiDS, code, err, out, errs)
	}
	checkPrefixFiles(t, prefix, want)
	checkH5dump(t, filepath.Join(prefix, mpiDS, "step_100", "ckpt.h5"))

	// Every cache wiped: the job fetches the files from the prefix.
	stopWiped(t, c)
	c.Start()
	settled(t, c, mpiDS, "protected")
	checkMPIFiles(t, "fetched on 4 nodes", c.Nodes, want)
	w.readBack(t, "fetched on 4 nodes", all)

	// A job of 2 nodes fetches what 4 flushed.
	for _, n := range c.Nodes {
		must(t, n.Stop())
	}
	c2 := NewCluster(t, 2, mpiJobEnv(prefix)...).Start()
	settled(t, c2, mpiDS, "protected")
	checkMPIFiles(t, "fetched on 2 nodes", c2.Nodes, want)
	w.readBack(t, "fetched on 2 nodes", mountsOf(c2, 0, 1))
}

// readBack reads every case's file back with its program, rank r on
// dirs[r], every rank checking every byte.
func (w *mpiWorld) readBack(t *testing.T, when string, dirs []string) {
	t.Helper()
	for _, k := range ckptCases {
		w.ok(t, when+": read "+k.name, dirs, k.readArgv(w, mpiDS)...)
	}
}

// checkMPIFiles reads every case's file through each node's mount and
// compares it with the reference (want, sha256 by case).
func checkMPIFiles(t *testing.T, when string, nodes []*Node, want map[string]string) {
	t.Helper()
	for _, n := range nodes {
		for _, k := range ckptCases {
			if got := sha256Of(t, n.Path(mpiDS, k.file)); got != want[k.name] {
				t.Errorf("%s: %s reads %s as sha256 %.16s, the reference run wrote %.16s", when, n.Mount, k.file, got, want[k.name])
			}
		}
	}
}

// checkPrefixFiles checks the flushed dataset: each case's file once in
// the manifest and byte-identical to the reference in the prefix.
func checkPrefixFiles(t *testing.T, prefix string, want map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(prefix, ".scrfs", "manifests", mpiDS, "manifest.json"))
	must(t, err)
	var m struct{ Entries []manifestEntry }
	must(t, json.Unmarshal(b, &m))
	listed := map[string]int{}
	for _, e := range m.Entries {
		listed[e.Path]++
	}
	for _, k := range ckptCases {
		if listed[k.file] != 1 {
			t.Errorf("the manifest lists %s %d times, want once", k.file, listed[k.file])
		}
		if got := sha256Of(t, filepath.Join(prefix, mpiDS, k.file)); got != want[k.name] {
			t.Errorf("the prefix holds %s with sha256 %.16s, the reference run wrote %.16s", k.file, got, want[k.name])
		}
	}
}

// TestMPIDataSieving: ROMIO's data sieving of independent noncontiguous
// writes (romio_ds_write enable) reads a block, patches its own pieces in
// and writes the block back under an fcntl lock; on node-local fragments
// of a shared file the read returns zeros where another node wrote, and
// the write-back clobbers it. scrfs makes it work, or fails it loudly with
// a message naming the hint (a daemon's log, or the failed dataset's
// reason) — never a silently wrong file.
func TestMPIDataSieving(t *testing.T) {
	w := requireMPI(t)
	c := NewCluster(t, 4, mpiJobEnv(t.TempDir())...).Start()
	all := mountsOf(c, 0, 1, 2, 3)
	const file = "sieved.dat"
	out, err := w.run(all, w.prog("ckpt_mpiio"), "write-strided", w.at(mpiDS, file), "65536", "64", "enable")
	if err != nil {
		if !anyLogNames(c, "romio_ds_write") {
			t.Fatalf("the data-sieving write failed and no daemon named romio_ds_write: %v\n%s", err, out)
		}
		t.Logf("the data-sieving write failed, and a daemon named the hint: %v", err)
		return
	}
	markComplete(t, c, mpiDS)
	c.WaitState(60*time.Second, mpiDS, settledStates...)
	if d := c.Nodes[0].WaitState(time.Second, mpiDS, settledStates...); d.State == "failed" {
		if !strings.Contains(d.Reason, "romio_ds_write") {
			t.Fatalf("the data-sieving write failed the dataset without naming romio_ds_write: %s", d.Reason)
		}
		t.Logf("the data-sieving write failed the dataset, naming the hint: %s", d.Reason)
		return
	}
	settled(t, c, mpiDS, "protected")
	wantSum := sha256hex(ckptBytes(16 << 20))
	for i, n := range c.Nodes {
		if got := sha256Of(t, n.Path(mpiDS, file)); got != wantSum {
			t.Errorf("node %d reads the data-sieved file as sha256 %.16s, want %.16s: silently wrong", i, got, wantSum)
		}
	}
	w.ok(t, "read back the data-sieved file", all, w.prog("ckpt_mpiio"), "read", w.at(mpiDS, file), "16777216")
}

// anyLogNames tells whether a log of a node of c mentions s.
func anyLogNames(c *Cluster, s string) bool {
	for _, n := range c.Nodes {
		if n.log.count(s) > 0 {
			return true
		}
	}
	return false
}
