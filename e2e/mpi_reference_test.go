package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// The checkpoints MPI applications write into one shared file, and the
// reference: the same programs on one plain directory every rank shares,
// as on a parallel file system, give the bytes scrfs must hold.

// ckptCase is one way an application writes a shared checkpoint file, on
// 4 ranks.
type ckptCase struct {
	name  string   // what the application does
	prog  string   // the program (testdata/mpi/PROG.c)
	file  string   // the file it writes, below the checkpoint's directory
	write []string // the write's mode, then its arguments after the file
	read  string   // the read's argument after the file: the size (rows of the dataset for HDF5)
}

var ckptCases = []ckptCase{
	// MPI_File_write_at_all of 4 MiB per rank.
	{"collective", "ckpt_mpiio", "collective.dat", []string{"write-collective", "4194304"}, "16777216"},
	// 64 pieces of 64 KiB per rank, round-robin, independent, data sieving off.
	{"strided", "ckpt_mpiio", "strided.dat", []string{"write-strided", "65536", "64", "disable"}, "16777216"},
	// A 4096 x 512 dataset of 64-bit words, 1024 rows per rank, collective,
	// in a directory rank 0 makes inside the checkpoint.
	{"hdf5", "ckpt_h5", "step_100/ckpt.h5", []string{"write", "1024"}, "4096"},
}

// writeArgv runs the case's write into checkpoint directory dir.
func (k ckptCase) writeArgv(w *mpiWorld, dir string) []string {
	return append([]string{w.prog(k.prog), k.write[0], w.at(dir, k.file)}, k.write[1:]...)
}

// readArgv reads the case's file back from checkpoint directory dir.
func (k ckptCase) readArgv(w *mpiWorld, dir string) []string {
	return []string{w.prog(k.prog), "read", w.at(dir, k.file), k.read}
}

// references writes every case into one plain directory all 4 ranks
// share, and returns each file's sha256 by case name.
func (w *mpiWorld) references(t *testing.T) (dir string, sums map[string]string) {
	t.Helper()
	dir = t.TempDir()
	sums = map[string]string{}
	for _, k := range ckptCases {
		w.ok(t, "reference "+k.name+" write", slices.Repeat([]string{dir}, 4), k.writeArgv(w, "ckpt.1")...)
		sums[k.name] = fileSum(t, filepath.Join(dir, "ckpt.1", k.file))
	}
	return dir, sums
}

// TestMPIReference: on one shared plain directory (no scrfs) every case
// writes its file on 4 ranks and reads it back on 4 and on 2; the MPI-IO
// files are byte for byte what the programs promise (ckptBytes), and
// h5dump reads the HDF5 file. These are the runs the tests on scrfs
// compare with.
func TestMPIReference(t *testing.T) {
	w := requireMPI(t)
	dir, sums := w.references(t)
	for _, k := range ckptCases {
		for _, ranks := range []int{4, 2} {
			w.ok(t, "reference "+k.name+" read", slices.Repeat([]string{dir}, ranks), k.readArgv(w, "ckpt.1")...)
		}
	}
	want := sha256hex(ckptBytes(16 << 20))
	for _, name := range []string{"collective", "strided"} {
		if sums[name] != want {
			t.Errorf("%s: the reference file's sha256 is %s, the content the programs promise %s", name, sums[name], want)
		}
	}
	checkH5dump(t, filepath.Join(dir, "ckpt.1", "step_100", "ckpt.h5"))
}

// checkH5dump reads the HDF5 checkpoint at path with h5dump, an ordinary
// tool that knows nothing of MPI or scrfs: its structure, and the last
// words of the last row, which rank 3 wrote.
func checkH5dump(t *testing.T, path string) {
	t.Helper()
	out := h5dump(t, "-H", path)
	if !strings.Contains(out, `DATASET "weights"`) || !strings.Contains(out, "( 4096, 512 ) / ( 4096, 512 )") {
		t.Fatalf("h5dump -H %s does not show the 4096 x 512 dataset /step/weights:\n%s", path, out)
	}
	out = h5dump(t, "-d", "/step/weights", "-s", "4095,508", "-c", "1,4", path)
	for i := uint64(4095*512 + 508); i < 4096*512; i++ {
		if v := strconv.FormatUint(ckptWord(i), 10); !strings.Contains(out, v) {
			t.Fatalf("h5dump of %s: word %d is not %s:\n%s", path, i, v, out)
		}
	}
}

// h5dump runs h5dump, bounded in time, and returns its output.
func h5dump(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	out, err := exec.CommandContext(ctx, "h5dump", args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("HANG: h5dump %s: no answer within %v", strings.Join(args, " "), testutil.Scale(30*time.Second))
	}
	if err != nil {
		t.Fatalf("h5dump %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
