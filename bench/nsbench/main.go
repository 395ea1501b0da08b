// Command nsbench measures the job-wide namespace (issue 13): every node
// of a job reading, listing and loading checkpoints other nodes wrote,
// side by side in one run with what the machine allows for the same work.
//
//	go run ./bench/nsbench [-nodes 4] [-size 1GiB] [-shard 256MiB] [-files 10000] [-scale 4,8,16,32] [-rounds 3]
//
// Measurements (-only picks some):
//
//   - remote: one node reads a -size file another node wrote, through its
//     mount with a cold read cache, beside one plain TCP stream of the
//     same bytes between two processes over loopback (target ≥ 0.8×);
//     then -readers readers on a third node read it at once, and its
//     daemon must receive the file once.
//   - dcp: PyTorch DCP's read pattern on -nodes × -ranks ranks (every rank
//     reads .metadata, a replicated file and its own shard through its
//     node's mount) and resharded on 2 ranks (each also reads half of
//     every shard), beside the same reads from one tmpfs directory
//     (target ≤ 1.5×).
//   - torch: the same with Debian's python3-torch itself (save and load
//     with torch.distributed checkpoint through the mounts, and from a
//     plain directory); skipped with a message when torch is missing.
//   - list: readdir and lstat of every entry of a -files dataset on a node
//     that wrote none of it, beside the node that wrote it all: first
//     listing, cold kernel caches, warm (target ≤ 2×).
//   - create: a one-file-per-rank checkpoint's creates, every node
//     -creates files of -file-size through its own mount, all nodes at
//     once, with -base (an older build) beside this one round by round
//     (target: this build ≥ 0.8× the base's rate; issue 29).
//   - scale: jobs of every size in -scale on this machine: time from
//     completion until every node's mount shows the whole dataset, and
//     requests per node per dataset (scrfs_peer_requests_total), which
//     must not grow with the job.
//
// Ranks and readers are goroutines of this process, every node a real
// `scrfs mount` daemon on 127.0.0.N. Progress goes to stderr, the report to
// stdout.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/bench/internal/netbound"
)

// options are the command-line settings.
type options struct {
	nodes, ranks, readers, rounds int
	size                          int64 // remote file
	shard, replicated, metadata   int64 // DCP pattern
	files, dirs                   int   // listing
	creates                       int   // files each node creates
	base                          string
	fileSize                      int64
	scale                         []int // job sizes of the control-plane measurement
	scaleDatasets                 int
	scheme                        string
	only                          []string
	torchScript, python           string
	torchRows                     int
	dir, bin                      string
	verbose                       bool
	settings                      []string
}

// measurements are the parts -only selects from, in the order they run.
var measurements = []string{"remote", "dcp", "torch", "list", "create", "scale"}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("nsbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.nodes, "nodes", 4, "daemons of the main job, on 127.0.0.1..N")
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds after one untimed warm-up")
	size := fs.String("size", "1GiB", "the remote file")
	fs.IntVar(&o.readers, "readers", 4, "local readers of one remote file at once")
	shard := fs.String("shard", "256MiB", "DCP pattern: bytes of each rank's shard")
	repl := fs.String("replicated", "64MiB", "DCP pattern: the replicated file every rank reads")
	meta := fs.String("metadata", "1MiB", "DCP pattern: .metadata, which every rank reads")
	fs.IntVar(&o.ranks, "ranks", 1, "DCP pattern: ranks per node (the resharded load has 2 ranks in all)")
	fs.IntVar(&o.files, "files", 10000, "files of the listed dataset")
	fs.IntVar(&o.dirs, "dirs", 100, "directories they are spread over")
	fs.IntVar(&o.creates, "creates", 2000, "files each node creates in the create measurement")
	fs.StringVar(&o.base, "base", "", "an older scrfs binary the create measurement runs beside this build, round by round")
	fileSize := fs.String("file-size", "4KiB", "bytes per listed file")
	scale := fs.String("scale", "4,8,16,32", "job sizes of the control-plane measurement")
	fs.IntVar(&o.scaleDatasets, "scale-datasets", 5, "measured datasets per job size (after one warm-up)")
	fs.StringVar(&o.scheme, "scheme", "xor", "redundancy scheme of every job (partner, xor, rs: each measurement waits for \"dataset protected\", which single never logs)")
	only := fs.String("only", strings.Join(measurements, ","), "measurements to run")
	fs.StringVar(&o.python, "python", "/usr/bin/python3", "a python3 that imports torch (Debian's python3-torch), for -only torch")
	fs.StringVar(&o.torchScript, "torch-script", "e2e/testdata/torch_ckpt.py", "the DCP save/load script the e2e tests run")
	fs.IntVar(&o.torchRows, "torch-rows", 16384, "rows of 4096 float32 of the sharded tensor the torch measurement saves and loads (16384: 256 MiB)")
	fs.StringVar(&o.dir, "dir", "/dev/shm", "scratch directory: caches, control dirs, mountpoints and the direct copies (RAM disk)")
	fs.StringVar(&o.bin, "bin", "", "scrfs binary to run (default: go build ./cmd/scrfs)")
	fs.BoolVar(&o.verbose, "v", false, "echo the daemons' warnings and errors")
	job.SettingsFlag(fs, &o.settings)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range []struct {
		name string
		arg  string
		dst  *int64
		min  int64
	}{{"-size", *size, &o.size, 1}, {"-shard", *shard, &o.shard, 2}, {"-replicated", *repl, &o.replicated, 1},
		{"-metadata", *meta, &o.metadata, 1}, {"-file-size", *fileSize, &o.fileSize, 0}} {
		v, err := job.ParseSize(s.arg)
		if err != nil || v < s.min {
			return o, fmt.Errorf("%s %q: want a size of at least %d bytes such as 64MiB", s.name, s.arg, s.min)
		}
		*s.dst = v
	}
	if o.nodes < 3 || o.nodes > 64 {
		return o, fmt.Errorf("-nodes %d: want 3 to 64 (a writer and two readers)", o.nodes)
	}
	if o.rounds < 1 || o.ranks < 1 || o.readers < 1 || o.files < 1 || o.dirs < 1 || o.creates < 1 || o.scaleDatasets < 1 || o.torchRows < 4 {
		return o, errors.New("-rounds, -ranks, -readers, -files, -dirs, -creates and -scale-datasets: want ≥ 1; -torch-rows ≥ 4")
	}
	var err error
	if o.scale, err = ints(*scale); err != nil {
		return o, fmt.Errorf("-scale: %w", err)
	}
	for _, n := range o.scale {
		if n < 2 || n > 200 {
			return o, fmt.Errorf("-scale %d: want 2 to 200 daemons", n)
		}
	}
	if !slices.Contains([]string{"partner", "xor", "rs"}, o.scheme) {
		return o, fmt.Errorf("-scheme %q: want partner, xor or rs", o.scheme)
	}
	for _, m := range strings.Split(*only, ",") {
		m = strings.TrimSpace(m)
		if !slices.Contains(measurements, m) {
			return o, fmt.Errorf("-only: %q is not one of %s", m, strings.Join(measurements, ", "))
		}
		o.only = append(o.only, m)
	}
	return o, nil
}

// ints parses a comma-separated list of integers.
func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// does reports whether measurement m was asked for.
func (o options) does(m string) bool { return slices.Contains(o.only, m) }

func main() {
	if len(os.Args) > 1 && os.Args[1] == netbound.NodeArg {
		os.Exit(netbound.NodeMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	job.Main("nsbench", parseFlags, run)
}
