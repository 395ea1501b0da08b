package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// ratio returns the median of the per-round ratios a[i]/b[i] (measured
// side by side, so a disturbance of one round moves both) and their
// range.
func ratio(a, b []time.Duration) (median, lo, hi float64) {
	var v []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			v = append(v, a[i].Seconds()/b[i].Seconds())
		}
	}
	if len(v) == 0 {
		return 0, 0, 0
	}
	return job.Median(v), slices.Min(v), slices.Max(v)
}

// verdict says whether a ratio met its target: at most (or, with atLeast,
// at least) target.
func verdict(r, target float64, atLeast bool) string {
	if r == 0 {
		return "not measured"
	}
	if (atLeast && r >= target) || (!atLeast && r <= target) {
		return "met"
	}
	return "MISSED"
}

// fmtRatio prints a ratio with its range and verdict.
func fmtRatio(a, b []time.Duration, target float64, atLeast bool) string {
	m, lo, hi := ratio(a, b)
	cmp := "≤"
	if atLeast {
		cmp = "≥"
	}
	return fmt.Sprintf("%.2f× [%.2f–%.2f] (target %s %.1f×: %s)", m, lo, hi, cmp, target, verdict(m, target, atLeast))
}

func report(w io.Writer, o options, res *results) {
	fmt.Fprintf(w, "\nnsbench: %d nodes (%s), medians of %d rounds after an untimed warm-up; ratios are the medians of per-round ratios [range]\n",
		o.nodes, o.scheme, o.rounds)
	if r := res.remote; r != nil && len(r.cold) > 0 {
		stream, cold := job.Median(r.stream), job.Median(r.cold)
		fmt.Fprintf(w, "\nremote read of a %s file another node wrote, through the mount, cold read cache (open + 1 MiB reads + close)\n", job.FormatBytes(r.size))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "one TCP stream, two processes\t%s\t%s\n", job.FormatSpread(r.stream), job.FormatRate(r.size, stream))
		fmt.Fprintf(tw, "the same, sender reading a file, receiver writing a new one\t%s\t%s\n", job.FormatSpread(r.streamIO), job.FormatRate(r.size, job.Median(r.streamIO)))
		fmt.Fprintf(tw, "remote read (cold)\t%s\t%s\tof which open (the fetch) %s\n", job.FormatSpread(r.cold), job.FormatRate(r.size, cold), job.FormatSpread(r.open))
		fmt.Fprintf(tw, "same file again (warm)\t%s\t%s\n", job.FormatSpread(r.warm), job.FormatRate(r.size, job.Median(r.warm)))
		fmt.Fprintf(tw, "%d readers at once (cold)\t%s\t%s\n", o.readers, job.FormatSpread(r.many), job.FormatRate(r.size, job.Median(r.many)))
		tw.Flush()
		// Throughput ratio: stream time ÷ read time.
		fmt.Fprintf(w, "remote read throughput ÷ TCP stream: %s\n", fmtRatio(r.stream, r.cold, targetRemote, true))
		m, lo, hi := ratio(r.streamIO, r.cold)
		fmt.Fprintf(w, "remote read throughput ÷ the stream with file I/O (a verified copy into the read cache needs at least that): %.2f× [%.2f–%.2f]\n", m, lo, hi)
		once := true
		for _, got := range r.manyRecv {
			once = once && got == r.size
		}
		fmt.Fprintf(w, "%d readers of one remote file: the daemon received %s per round (the file is %s): %s\n",
			o.readers, fmtBytesList(r.manyRecv), job.FormatBytes(r.size), map[bool]string{true: "once, met", false: "MISSED"}[once])
	}
	if r := res.dcp; r != nil && len(r.same.mount) > 0 {
		l := r.layout
		fmt.Fprintf(w, "\nDCP read pattern: %d shards of %s, a replicated file of %s, .metadata of %s; %d rank(s) per node, goroutines, 1 MiB preads;\n"+
			"through each rank's node's mount (cold read caches) ÷ the same reads from one tmpfs directory\n",
			l.shards, job.FormatBytes(l.shard), job.FormatBytes(l.replicated), job.FormatBytes(l.metadata), o.ranks)
		loads(w, []loadRow{
			{fmt.Sprintf("world %d (every rank: .metadata, replicated, its shard)", l.shards), r.same, r.sameRead},
			{fmt.Sprintf("world %d resharded (every rank: .metadata, replicated, 1/%d of every shard)", reshardWorld, reshardWorld), r.reshard, r.resRead},
		}, targetDCP)
	}
	if r := res.torch; r != nil {
		if r.skipped != "" {
			fmt.Fprintf(w, "\nreal DCP (torch): skipped: %s\n", r.skipped)
		} else if len(r.same.mount) > 0 {
			fmt.Fprintf(w, "\nreal DCP: torch 1.13 load_state_dict (longest rank, between barriers) of a %d × 4096 float32 sharded tensor (%s), a 1 MiB replicated one and a scalar,\n"+
				"saved by %d ranks (one per node); through the mounts ÷ from one tmpfs directory\n", r.rows, job.FormatBytes(int64(r.rows)*4096*4), o.nodes)
			loads(w, []loadRow{{fmt.Sprintf("world %d", o.nodes), r.same, 0}, {fmt.Sprintf("world %d resharded", reshardWorld), r.reshard, 0}}, targetDCP)
		}
	}
	if r := res.list; r != nil && len(r.other["first"]) > 0 {
		fmt.Fprintf(w, "\nlisting a dataset of %d files in %d directories (readdir + lstat of every entry, as ls -lR); the writer wrote it all, the other node none;\n"+
			"its record, which every node keeps and lists it from: %s (%d B per entry)\n", o.files, o.dirs, job.FormatBytes(r.recordBytes), r.recordBytes/int64(r.entries))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "kernel caches\twriter\tother node\tother ÷ writer")
		for _, s := range listStates {
			if len(r.other[s]) == 0 {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s, job.FormatSpread(r.writer[s]), job.FormatSpread(r.other[s]), fmtRatio(r.other[s], r.writer[s], targetList, false))
		}
		tw.Flush()
		fmt.Fprintln(w, "first = the first listing after completion, dentries dropped before (on the other node the daemon builds its view of the record then);\n"+
			"warm = again at once (entries and attributes in the kernel's caches); cold = after echo 2 > /proc/sys/vm/drop_caches (the daemons' views kept)")
		if r.coldWhy != "" {
			fmt.Fprintf(w, "not cold: %s (the writer's kernel still knew the entries it created)\n", r.coldWhy)
		}
	}
	if r := res.create; r != nil && len(r.this) > 0 {
		reportCreates(w, o, r)
	}
	if len(res.scale) > 0 {
		fmt.Fprintf(w, "\ncontrol plane: every node writes one %s file, node 0 writes COMPLETE; %d datasets per job size after a warm-up\n", job.FormatBytes(scaleFile), o.scaleDatasets)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "nodes\tCOMPLETE → visible everywhere\tnode 0's round\trequests/dataset node 0\tothers median (max)\tpeer bytes/dataset node 0\tothers median\trecord\tnode 0's requests by kind")
		for _, r := range res.scale {
			med, most := r.others()
			var others []float64
			for i := 1; i < r.nodes; i++ {
				others = append(others, r.bytes[i])
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.1f\t%.1f (%.1f)\t%s\t%s\t%s (%d B/file)\t%s\n", r.nodes, job.FormatSpread(r.visible), job.FormatSpread(r.round),
				r.perNode(0), med, most, job.FormatBytes(int64(r.bytes[0])), job.FormatBytes(int64(job.Median(others))),
				job.FormatBytes(r.recordBytes), r.recordBytes/int64(r.nodes+1), job.FormatTop(r.reqs[0], 6, 1/float64(r.datasets)))
		}
		tw.Flush()
		fmt.Fprintln(w, "requests = scrfs_peer_requests_total sent + received over the peer links (a call to itself is not one); peer bytes = sent + received, frames included;\n"+
			"visible everywhere = every node's mount lists every file, polled node after node (so up to one poll of every node late)")
		first, last := res.scale[0], res.scale[len(res.scale)-1]
		fm, _ := first.others()
		lm, _ := last.others()
		fmt.Fprintf(w, "requests per dataset from %d to %d nodes: node 0 %.1f → %.1f (%.2f× for %.1f× the nodes), the others %.1f → %.1f\n",
			first.nodes, last.nodes, first.perNode(0), last.perNode(0), last.perNode(0)/first.perNode(0), float64(last.nodes)/float64(first.nodes), fm, lm)
	}
}

// loadRow is one load of a DCP table.
type loadRow struct {
	name string
	t    loadTimes
	read int64 // bytes the ranks read, 0 if unknown
}

// loads prints the mount and direct times of each load and their ratio.
func loads(w io.Writer, rows []loadRow, target float64) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "load\tone directory\tmounts\tmounts ÷ directory\tdaemons received")
	for _, r := range rows {
		if len(r.t.mount) == 0 {
			continue
		}
		recv := fmtBytesList(r.t.received)
		if r.read > 0 {
			recv += " (ranks read " + job.FormatBytes(r.read) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.name, job.FormatSpread(r.t.direct), job.FormatSpread(r.t.mount), fmtRatio(r.t.mount, r.t.direct, target, false), recv)
	}
	tw.Flush()
}

// fmtBytesList prints the distinct byte counts of v, e.g. "1 GiB" or
// "1 GiB, 1.25 GiB".
func fmtBytesList(v []int64) string {
	s := slices.Compact(slices.Sorted(slices.Values(v)))
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += job.FormatBytes(x)
	}
	return out
}
