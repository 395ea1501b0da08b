package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/bench/internal/netbound"
	"github.com/scrfs/scrfs/internal/loopback"
)

// options are the command-line settings.
type options struct {
	size, small      int64
	nodes, rounds    int
	replicas, parity int
	schemes          string
	dir, bin         string
	rebuild, verbose bool
	settings         []string // extra SCRFS_* settings for every daemon
	link             string   // tc rate each node may receive at, or "" for the bare loopback
	fetch            bool     // measure a cold fetch from a prefix on disk at the full size
	disk             string   // where the prefix goes
	s3               bool     // the prefix of -fetch in object storage (versitygw over -disk)
	ab               string   // -ab: the scrfs binary B to compare with -bin (A), or ""
	abSettings       []string // SCRFS_* settings for B's daemons only
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("redbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizeArg := fs.String("size", "1GiB", "checkpoint bytes per node (one file each)")
	smallArg := fs.String("small", "", "a smaller size run too, to show peak RSS does not grow with the checkpoint (default size/4; 0 skips it)")
	fs.IntVar(&o.nodes, "nodes", 4, "daemons, one redundancy set, on 127.0.0.1..N")
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds after one untimed warm-up (and rebuilds per loss count)")
	fs.StringVar(&o.schemes, "schemes", "partner,xor,rs", "comma-separated schemes to measure")
	fs.IntVar(&o.replicas, "replicas", 1, "PARTNER copies r")
	fs.IntVar(&o.parity, "parity", 2, "RS checksums k")
	fs.StringVar(&o.dir, "dir", "/dev/shm", "scratch directory for caches, control dirs and mountpoints (RAM disk)")
	fs.StringVar(&o.bin, "bin", "", "scrfs binary to run (default: go build ./cmd/scrfs)")
	fs.BoolVar(&o.rebuild, "rebuild", true, "measure rebuilds after node losses")
	fs.BoolVar(&o.fetch, "fetch", true, "measure a cold fetch with re-protect from a prefix on -disk, page cache dropped (root)")
	fs.StringVar(&o.disk, "disk", "/tmp", "directory on disk for the prefix of -fetch")
	fs.BoolVar(&o.s3, "s3", false, "with -fetch, the prefix in S3: versitygw on loopback over -disk, beside the AWS SDK's transfer manager (bench/s3bound) instead of cp -r")
	fs.BoolVar(&o.verbose, "v", false, "echo the daemons' warnings and errors")
	fs.StringVar(&o.link, "link", "", "cap what each node receives at this tc rate (e.g. 2gbit) with a qdisc on lo, so the network is the bound as on a cluster (root, tc)")
	job.SettingsFlag(fs, &o.settings)
	fs.StringVar(&o.ab, "ab", "", "compare -bin (A) with this scrfs binary (B): both jobs side by side taking turns round by round, at -size only, no bounds or fetch")
	job.SettingFlag(fs, "ab-set", "with -ab, a setting SCRFS_SECTION_KEY=VALUE (repeatable) for B's daemons only, e.g. to compare settings with -ab set to the -bin binary", &o.abSettings)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.link != "" && !linkRate.MatchString(o.link) {
		return o, fmt.Errorf("-link %q: want a rate such as 2gbit or 500mbit", o.link)
	}
	var err error
	if o.size, err = job.ParseSize(*sizeArg); err != nil || o.size < 1 {
		return o, fmt.Errorf("-size %q: want a positive size such as 1GiB", *sizeArg)
	}
	o.small = o.size / 4
	if *smallArg != "" {
		if o.small, err = job.ParseSize(*smallArg); err != nil || o.small < 0 || o.small >= o.size {
			return o, fmt.Errorf("-small %q: want 0 or a size below -size", *smallArg)
		}
	}
	if o.nodes < 2 || o.nodes > 200 {
		return o, fmt.Errorf("-nodes %d: want 2 to 200", o.nodes)
	}
	if o.rounds < 1 {
		return o, fmt.Errorf("-rounds %d: want at least 1", o.rounds)
	}
	if len(o.abSettings) > 0 && o.ab == "" {
		return o, fmt.Errorf("-ab-set needs -ab")
	}
	return o, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == netbound.NodeArg {
		os.Exit(netbound.NodeMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	job.Main("redbench", parseFlags, run)
}

// run measures every scheme and prints the report to stdout; progress goes
// to stderr. It returns an error when any measurement failed.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	schemes, err := parseSchemes(o.schemes, o.nodes, o.replicas, o.parity)
	if err != nil {
		return err
	}
	disk, err := os.MkdirTemp(o.disk, "redbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(disk)
	work, err := os.MkdirTemp(o.dir, "redbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for the node processes: %w", err)
	}
	b := &bench{o: o, work: work, disk: disk, pay: newPayload(o.nodes), net: &netbound.InProc{}, procs: netbound.Procs{Self: self}, status: stderr}
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
	if o.link != "" {
		unshape, err := shapeLinks(o.link, o.nodes)
		if err != nil {
			return err
		}
		defer unshape()
	}
	if o.ab != "" {
		return runAB(ctx, b, schemes, stdout)
	}
	if o.s3 && o.fetch {
		if b.s3, err = startS3(work, disk); err != nil {
			return err
		}
		defer b.s3.srv.Kill()
	}
	sizes := []int64{o.size}
	if o.small > 0 {
		sizes = []int64{o.small, o.size}
	}

	b.progress("(b) in-process encode of %d × %s, one core", o.nodes, job.FormatBytes(o.size))
	enc, err := measureEncode(o.nodes, o.parity, int64(o.nodes)*o.size, o.rounds)
	if err != nil {
		return err
	}
	stream, err := netbound.Measure(ctx, b.procs, netbound.Stream(o.size), nil, o.rounds)
	if err != nil {
		return err
	}

	results := map[string][]*sizeResult{}
	var failed []string
	for _, sch := range schemes {
		for _, size := range sizes {
			res := b.runSize(ctx, sch, size, size == o.size)
			results[sch.String()] = append(results[sch.String()], res)
			if res.err != nil {
				failed = append(failed, fmt.Sprintf("%s at %s: %v", sch, job.FormatBytes(size), res.err))
			}
			for _, rr := range res.rebuilds {
				if rr.err != nil {
					failed = append(failed, fmt.Sprintf("%s rebuild of %d: %v", sch, rr.lost, rr.err))
				}
			}
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
		}
	}
	report(stdout, o, schemes, sizes, enc, job.Median(netbound.Walls(stream)), results)
	if len(failed) > 0 {
		return fmt.Errorf("%d measurement(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}
