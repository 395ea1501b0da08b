package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// targetLarge is issue 16's target for the large-file stall through the
// mount (with passthrough) against the same writes done directly.
const targetLarge = 1.05

func report(w io.Writer, o options, results map[string]map[string]*series) {
	fmt.Fprintf(w, "\ncheckpoint stall, %d nodes × %d ranks; large and dcp: %s per rank (1 MiB writes, fsync); small: %d × %d B per rank; caches and direct writes in %s\n",
		o.nodes, o.ranks, fmtBytes(o.size), o.small, o.smallSize, o.dir)
	fmt.Fprintf(w, "median [min–max] of %d rounds after an untimed warm-up; direct and mount alternate which goes first; settle before each: %v\n", o.rounds, o.settle)
	fmt.Fprint(w, "stall = first open → last close (dcp: → the rename of .metadata); complete = first open → the last node's \"dataset complete\";\n"+
		"protected = earliest \"dataset complete\" → latest \"dataset protected\" (off the application's path); worst = the largest per-round ratio\n\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "scheme\tworkload\tdirect stall\tmount stall\t÷ direct\tworst\tmount complete\t÷ direct\tprotected\tranks' CPU ÷ direct\tdaemons' CPU\thost took back\tothers' CPU\tredone")
	for _, sch := range o.schemes {
		for _, name := range o.workloads {
			s := results[sch][name]
			if s == nil || len(s.direct) == 0 || len(s.mount) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t(not measured)\n", sch, name)
				continue
			}
			d, m := stalls(s.direct), stalls(s.mount)
			comp := pick(s.mount, func(x sample) time.Duration { return x.complete })
			prot := pick(s.mount, func(x sample) time.Duration { return x.protected })
			worst := 0.0
			for i := range min(len(d), len(m)) {
				worst = max(worst, m[i].Seconds()/d[i].Seconds())
			}
			ratio := job.Median(m).Seconds() / job.Median(d).Seconds()
			mark := ""
			if name == "large" {
				mark = " (target ≤ 1.05: missed)"
				if worst <= targetLarge {
					mark = " (target ≤ 1.05: met)"
				}
			}
			var took int64
			var others time.Duration
			for _, x := range append(s.direct, s.mount...) {
				took, others = max(took, x.reported), max(others, x.others)
			}
			rw := job.Median(pick(s.mount, func(x sample) time.Duration { return x.writers })).Seconds() /
				job.Median(pick(s.direct, func(x sample) time.Duration { return x.writers })).Seconds()
			dmn := job.Median(pick(s.mount, func(x sample) time.Duration { return x.daemons }))
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%.2f%s\t%s\t%.2f\t%s\t%.2f\t%.3f s\t%d MiB\t%.2f s\t%d\n", sch, name, spread(d), spread(m), ratio, worst, mark,
				spread(comp), job.Median(comp).Seconds()/job.Median(d).Seconds(), spread(prot), rw, dmn.Seconds(), took>>10, others.Seconds(), s.redone)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "\nhost took back = the most memory the guest handed back to the host (free page reporting) during one measurement;\n"+
		"writing into such memory again costs the host a fault per page, so a measurement where it is large paid for it;\n"+
		"ranks' CPU ÷ direct = the CPU time the ranks (this process) used writing through the mounts over writing directly, medians: what the mount costs the application per byte;\n"+
		"daemons' CPU = the daemons' CPU time during the stall through the mounts (median, all nodes);\n"+
		"others' CPU = the most CPU time other processes on the machine used during one kept measurement (from /proc/stat);\n"+
		"redone = rounds measured again because other processes used more than 10% of a core meanwhile (at most -retries times)")
}

func stalls(v []sample) []time.Duration {
	return pick(v, func(x sample) time.Duration { return x.stall })
}

func pick(v []sample, f func(sample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}

// spread formats the median and range of v.
func spread(v []time.Duration) string {
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.3f s [%.3f–%.3f]", job.Median(v).Seconds(), lo.Seconds(), hi.Seconds())
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
