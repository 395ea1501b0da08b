// Command stall measures the checkpoint stall an application sees through
// scrfs: the time from the first open of a checkpoint's files to the last
// close (and, where the application waits for it, until the dataset is
// complete on every node), side by side with the same writes into a
// directory on the cache's device, in one run. It reports the time from
// completion to protected beside it, which the application does not wait
// for.
//
//	go run ./bench/stall [-nodes 4] [-ranks 4] [-size 1GiB] [-small 1000] [-schemes single,partner,xor,rs]
//
// Workloads (issue 16): "large", one file per rank of -size bytes in 1 MiB
// writes with fsync, then a COMPLETE marker; "dcp", PyTorch DCP's layout, a
// shard per rank, then rank 0's .metadata written as .metadata.tmp, fsynced
// and renamed; "small", -small files of -small-size bytes per rank in its
// own directory, then COMPLETE. Ranks are goroutines of this process, all
// nodes' at once; every node is a real `scrfs mount` daemon on 127.0.0.N.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/internal/loopback"
)

// options are the command-line settings.
type options struct {
	nodes, ranks, rounds int
	retries              int
	size                 int64
	small, smallSize     int
	schemes, workloads   []string
	dir, bin             string
	verbose, settle      bool
	settings             []string
}

var knownSchemes = []string{"single", "partner", "xor", "rs"}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("stall", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.nodes, "nodes", 4, "daemons, on 127.0.0.1..N")
	fs.IntVar(&o.ranks, "ranks", 4, "application ranks per node")
	sizeArg := fs.String("size", "1GiB", "bytes per rank of the large file and of the DCP shard")
	fs.IntVar(&o.small, "small", 1000, "small files per rank")
	smallSize := fs.String("small-size", "4KiB", "bytes per small file")
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds after one untimed warm-up")
	fs.IntVar(&o.retries, "retries", 4, "times a round is measured again when other processes used the CPU meanwhile")
	schemes := fs.String("schemes", strings.Join(knownSchemes, ","), "comma-separated redundancy schemes")
	wls := fs.String("workloads", "large,dcp,small", "comma-separated workloads")
	fs.StringVar(&o.dir, "dir", "/dev/shm", "scratch directory: caches, control dirs, mountpoints and the direct writes (RAM disk)")
	fs.StringVar(&o.bin, "bin", "", "scrfs binary to run (default: go build ./cmd/scrfs)")
	fs.BoolVar(&o.verbose, "v", false, "echo the daemons' warnings and errors")
	fs.BoolVar(&o.settle, "settle", true, "before each measurement, write and delete as much as the checkpoint in -dir, so direct and mount both land on memory the host has just backed")
	job.SettingsFlag(fs, &o.settings)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.size, err = job.ParseSize(*sizeArg); err != nil || o.size < 1 {
		return o, fmt.Errorf("-size %q: want a positive size such as 1GiB", *sizeArg)
	}
	ss, err := job.ParseSize(*smallSize)
	if err != nil || ss < 1 || ss > ioSize {
		return o, fmt.Errorf("-small-size %q: want 1 byte to 1MiB", *smallSize)
	}
	o.smallSize = int(ss)
	if o.nodes < 1 || o.nodes > 64 {
		return o, fmt.Errorf("-nodes %d: want 1 to 64", o.nodes)
	}
	if o.ranks < 1 || o.small < 0 || o.rounds < 1 || o.retries < 0 {
		return o, fmt.Errorf("-ranks, -small, -rounds and -retries: want ≥ 1, ≥ 0, ≥ 1 and ≥ 0")
	}
	if o.schemes, err = list(*schemes, knownSchemes); err != nil {
		return o, fmt.Errorf("-schemes: %w", err)
	}
	if o.workloads, err = list(*wls, []string{"large", "dcp", "small"}); err != nil {
		return o, fmt.Errorf("-workloads: %w", err)
	}
	for _, s := range o.schemes {
		if s != "single" && o.nodes < 2 {
			return o, fmt.Errorf("-schemes %s needs -nodes ≥ 2", s)
		}
	}
	return o, nil
}

// list splits a comma-separated list whose items must be in known.
func list(s string, known []string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if !slices.Contains(known, item) {
			return nil, fmt.Errorf("%q is not one of %s", item, strings.Join(known, ", "))
		}
		out = append(out, item)
	}
	return out, nil
}

func main() {
	job.Main("stall", parseFlags, run)
}

// run measures every scheme in turn and prints the report to stdout;
// progress goes to stderr.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	work, err := os.MkdirTemp(o.dir, "stall-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b := &bench{o: o, work: work, status: stderr, w: newWriter(o.nodes*o.ranks, o.size, o.small, o.smallSize)}
	if o.verbose {
		b.echo = stderr
	}
	if b.bin = o.bin; b.bin == "" {
		if b.bin, err = job.Build(work); err != nil {
			return err
		}
	}
	if b.port, err = loopback.FreePort(o.nodes); err != nil {
		return err
	}
	results := map[string]map[string]*series{}
	var failed []string
	for _, sch := range o.schemes {
		res, err := b.runScheme(ctx, sch)
		results[sch] = res
		if err != nil {
			failed = append(failed, err.Error())
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
	report(stdout, o, results)
	if len(failed) > 0 {
		return fmt.Errorf("%d scheme(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}
