package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// MPI jobs through the mounts (issue 29). Open MPI's mpirun starts every
// rank of a job on this one host; testdata/mpi/rankns.sh puts each rank in
// a mount namespace of its own, with "its node's" directory (a node's scrfs
// mount, or a plain directory in the reference runs) bind-mounted at one
// common path, as /scr is on every node of a cluster. The programs are C
// (testdata/mpi/*.c), built by each test with mpicc or h5pcc.

// mpiTools are what the MPI tests run, each with the Debian package that
// has it (.ci/run installs them).
var mpiTools = []struct{ name, pkg string }{
	{"mpirun", "openmpi-bin"},
	{"mpicc", "libopenmpi-dev"},
	{"h5pcc", "libhdf5-openmpi-dev"},
	{"h5dump", "hdf5-tools"},
}

// mpiPrograms are the programs a test builds, each with its compiler.
var mpiPrograms = map[string]string{"ckpt_mpiio": "mpicc", "ckpt_h5": "h5pcc"}

// mpiRunTimeout bounds one mpirun (scaled, testutil.Scale): a job of a few
// 16 MiB files takes a second or two; one still running after this hangs.
const mpiRunTimeout = 30 * time.Second

// mpiWorld runs MPI jobs for one test.
type mpiWorld struct {
	tools  map[string]string // tool name → path
	bin    string            // the programs, built for this test
	rankns string            // testdata/mpi/rankns.sh, absolute
	scr    string            // the common path each rank sees its node's directory at
}

// requireMPI finds the MPI tools and builds the programs, or skips the test
// saying what is missing.
func requireMPI(t *testing.T) *mpiWorld {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real MPI jobs; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: each rank gets a mount namespace of its own (unshare --mount, mount --bind)")
	}
	w := &mpiWorld{tools: map[string]string{}, bin: t.TempDir(), scr: filepath.Join(t.TempDir(), "scr")}
	var missing []string
	for _, tool := range mpiTools {
		p, err := exec.LookPath(tool.name)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian's %s)", tool.name, tool.pkg))
		}
		w.tools[tool.name] = p
	}
	if len(missing) > 0 {
		t.Skipf("missing %s; .ci/run installs them", strings.Join(missing, ", "))
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare (util-linux) to give each rank a mount namespace of its own")
	}
	rankns, err := filepath.Abs("testdata/mpi/rankns.sh")
	must(t, err)
	w.rankns = rankns
	must(t, os.Mkdir(w.scr, 0o755))
	for prog, cc := range mpiPrograms {
		src, err := filepath.Abs(filepath.Join("testdata", "mpi", prog+".c"))
		must(t, err)
		build := exec.Command(w.tools[cc], "-O2", "-Wall", "-o", w.prog(prog), src)
		build.Dir = w.bin // h5pcc leaves its object file in the working directory
		out, err := build.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s.c: %v\n%s", cc, prog, err, out)
		}
	}
	return w
}

// prog is the path of a built program.
func (w *mpiWorld) prog(name string) string { return filepath.Join(w.bin, name) }

// at is path inside the common directory, as the ranks name it.
func (w *mpiWorld) at(rel ...string) string { return filepath.Join(append([]string{w.scr}, rel...)...) }

// mpirunArgs starts len(dirs) ranks of argv, rank r with dirs[r] at the
// common path: as root, oversubscribed (2 cores, 4 ranks), over TCP on
// loopback only (no shared memory between "nodes"), with ROMIO as the
// MPI-IO layer, whose hints the programs set and check (ckpt.h; Open MPI's
// default, OMPIO, takes none of them).
func (w *mpiWorld) mpirunArgs(dirs []string, argv []string) []string {
	args := []string{"--allow-run-as-root", "--oversubscribe",
		"--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo",
		"--mca", "io", "romio321",
		"-np", strconv.Itoa(len(dirs)), w.rankns, w.scr}
	args = append(append(args, dirs...), "--")
	return append(args, argv...)
}

// run runs argv as an MPI job of len(dirs) ranks, rank r on dirs[r], and
// returns its output once it exits. A job still running after
// mpiRunTimeout is killed, ranks and all, and reported as a hang with the
// step each rank was at and where each waited in the kernel.
func (w *mpiWorld) run(dirs []string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(mpiRunTimeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, w.tools["mpirun"], w.mpirunArgs(dirs, argv)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var hung string
	cmd.Cancel = func() error {
		// Open MPI gives every rank a process group of its own: kill
		// the ranks' groups one by one, after saying where they waited.
		ranks := childPids(cmd.Process.Pid)
		hung = describeRanks(ranks)
		for _, pid := range ranks {
			syscall.Kill(-pid, syscall.SIGKILL)
			syscall.Kill(pid, syscall.SIGKILL)
		}
		return cmd.Process.Kill()
	}
	// A rank that outlives its kill still holds the output pipe.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String(), fmt.Errorf("HANG: %d ranks still running after %v, killed; last step of each: %s; in the kernel: %s",
			len(dirs), testutil.Scale(mpiRunTimeout), lastSteps(out.String(), len(dirs)), hung)
	}
	if err != nil {
		return out.String(), fmt.Errorf("%v; last step of each rank: %s", err, lastSteps(out.String(), len(dirs)))
	}
	return out.String(), nil
}

// ok runs a job that must succeed, and fails the test with what it was
// doing otherwise.
func (w *mpiWorld) ok(t *testing.T, what string, dirs []string, argv ...string) {
	t.Helper()
	start := time.Now()
	out, err := w.run(dirs, argv...)
	if err == nil && !strings.Contains(out, "VERDICT ok") {
		err = fmt.Errorf("exited 0 without a VERDICT ok line")
	}
	if err != nil {
		t.Fatalf("%s (%d ranks, %s): %v\n%s", what, len(dirs), strings.Join(argv, " "), err, out)
	}
	t.Logf("%s: %d ranks, %v: %s", what, len(dirs), time.Since(start).Round(time.Millisecond), verdict(out))
}

// verdict is the VERDICT line of a job's output.
func verdict(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "VERDICT") {
			return l
		}
	}
	return "no verdict"
}

var stepLine = regexp.MustCompile(`^rank (\d+): (.*)$`)

// lastSteps is the last line each rank printed: the call it was in, if
// it never got further.
func lastSteps(out string, ranks int) string {
	last := make([]string, ranks)
	for _, l := range strings.Split(out, "\n") {
		if m := stepLine.FindStringSubmatch(l); m != nil {
			if r, _ := strconv.Atoi(m[1]); r < ranks {
				last[r] = m[2]
			}
		}
	}
	var b strings.Builder
	for r, s := range last {
		if s == "" {
			s = "(nothing printed)"
		}
		fmt.Fprintf(&b, "\n  rank %d: %s", r, s)
	}
	return b.String()
}

// childPids lists the processes whose parent is pid: mpirun's ranks.
func childPids(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		var state string
		var ppid int
		if _, err := fmt.Sscan(rest, &state, &ppid); err == nil && ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, child)
		}
	}
	slices.Sort(out)
	return out
}

// describeRanks says, for each rank process, which rank it is and where it
// waits in the kernel (a FUSE request, say, or a poll for its peers).
func describeRanks(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		rank := "?"
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("OMPI_COMM_WORLD_RANK=")); ok {
				rank = string(v)
			}
		}
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
		stack, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stack", pid))
		if w := string(wchan); w == "" || w == "0" {
			// Not blocked in the kernel: MPI's progress loop spins,
			// waiting for a peer.
			fmt.Fprintf(&b, "\n  rank %s (pid %d) runs, not blocked in the kernel", rank, pid)
			continue
		}
		fmt.Fprintf(&b, "\n  rank %s (pid %d) waits in %s", rank, pid, wchan)
		if fuse := fuseFrames(string(stack)); fuse != "" {
			fmt.Fprintf(&b, " (%s)", fuse)
		}
	}
	return b.String()
}

// fuseFrames picks the FUSE functions of a kernel stack: what a rank
// blocked in the file system waits for.
func fuseFrames(stack string) string {
	var out []string
	for _, l := range strings.Split(stack, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && strings.Contains(f[1], "fuse") {
			out = append(out, strings.SplitN(f[1], "+", 2)[0])
		}
	}
	return strings.Join(out, " < ")
}

// ckptWord is testdata/mpi/ckpt.h's ckpt_word: the 8 bytes at offset 8*i
// of every file the MPI programs write (little-endian), and word i of the
// HDF5 dataset.
func ckptWord(i uint64) uint64 {
	z := i + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// ckptBytes is the first n bytes (a multiple of 8) of such a file.
func ckptBytes(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], ckptWord(uint64(i/8)))
	}
	return b
}

// TestMPIRankNamespaces is the harness's own test, on plain directories:
// each of 4 ranks sees its "node's" directory at the common path and writes
// into it alone, the bind mounts stay inside the ranks' namespaces, and the
// ranks still reach each other — a collective write needs all four — each
// writing its own block through its own node, which is what the tests on
// scrfs take for granted.
func TestMPIRankNamespaces(t *testing.T) {
	w := requireMPI(t)
	const block = 1 << 20
	dirs := make([]string, 4)
	for i := range dirs {
		dirs[i] = t.TempDir()
		must(t, os.WriteFile(filepath.Join(dirs[i], "node"), []byte(fmt.Sprintf("node %d", i)), 0o644))
		// On a shared file system ranks 1-3 find the file rank 0
		// created; here each node's directory must hold it already.
		must(t, os.Mkdir(filepath.Join(dirs[i], "ckpt.1"), 0o755))
		must(t, os.WriteFile(filepath.Join(dirs[i], "ckpt.1", "shared.dat"), nil, 0o644))
	}

	out, err := w.run(dirs, "/bin/sh", "-c", `echo "rank $OMPI_COMM_WORLD_RANK: sees $(cat "$0/node")" && : > "$0/wrote.$OMPI_COMM_WORLD_RANK"`, w.scr)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for i, dir := range dirs {
		if want := fmt.Sprintf("rank %d: sees node %d\n", i, i); !strings.Contains(out, want) {
			t.Errorf("no line %q:\n%s", want, out)
		}
		names, err := filepath.Glob(filepath.Join(dir, "wrote.*"))
		if err != nil || len(names) != 1 || filepath.Base(names[0]) != fmt.Sprintf("wrote.%d", i) {
			t.Errorf("node %d's directory holds %v (%v), want rank %d's file alone", i, names, err, i)
		}
	}
	if left, err := os.ReadDir(w.scr); err != nil || len(left) != 0 {
		t.Errorf("the common path outside the ranks holds %d entries (%v): a bind mount leaked out of a rank's namespace", len(left), err)
	}
	if mountinfo, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mountinfo), " "+w.scr+" ") {
		t.Errorf("%s is a mount point outside the ranks", w.scr)
	}

	w.ok(t, "collective write, a directory per rank", dirs, w.prog("ckpt_mpiio"), "write-collective", w.at("ckpt.1", "shared.dat"), strconv.Itoa(block))
	want := ckptBytes(4 * block)
	for i, dir := range dirs {
		got, err := os.ReadFile(filepath.Join(dir, "ckpt.1", "shared.dat"))
		must(t, err)
		mine := want[i*block : (i+1)*block]
		if len(got) != (i+1)*block || !bytes.Equal(got[i*block:], mine) || slices.ContainsFunc(got[:i*block], func(b byte) bool { return b != 0 }) {
			t.Errorf("node %d's file: %d bytes, not rank %d's block alone at %d (each rank must write its own block through its own node)", i, len(got), i, i*block)
		}
	}
}
