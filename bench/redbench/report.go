package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/bench/internal/netbound"
	"github.com/scrfs/scrfs/config"
	"github.com/scrfs/scrfs/internal/loopback"
)

// Targets from issues 3 and 4.
const (
	targetPartner = 1.10 // time to protected ÷ (a), partner
	targetCoded   = 1.25 // time to protected ÷ (a), xor and rs
	targetRebuild = 1.50 // rebuild of one node ÷ encode time
)

// targetFetch is issue 15's cold fetch with re-protect ÷ (cp -r + encode).
const targetFetch = 1.2

// targetFetchProtect is issue 28's: the cold fetch with its re-protect ÷
// the fetch alone (the protect overlapping the fetch).
const targetFetchProtect = 1.15

// targetFirstByte and targetReadAll are issue 25's restart as the
// application sees it: a rank's first byte after the daemons start, and
// every rank's file read ÷ (cp -r from the prefix + the same reads).
const (
	targetFirstByte = 500 * time.Millisecond
	targetReadAll   = 0.8
)

// targetS3Fetch is issue 27's: a fetch from object storage ÷ the transfer
// manager moving the same bytes.
const targetS3Fetch = 1.25

// Targets from issue 15: the daemons' CPU seconds per GiB protected (all
// nodes' checkpoints together), and rebuild ÷ encode by scheme and nodes
// lost (a missing entry: issue 4's targetRebuild for one lost node).
var (
	targetCPU        = map[string]float64{"partner": 0.6, "xor": 0.8, "rs": 1.4}
	targetRebuildFor = map[string]map[int]float64{"partner": {1: 0.6}, "xor": {1: 0.6}, "rs": {2: 1.0}}
)

// rebuildTarget returns the rebuild ÷ encode target for kind with lost
// nodes, or 0 for none.
func rebuildTarget(kind string, lost int) float64 {
	if t, ok := targetRebuildFor[kind][lost]; ok {
		return t
	}
	if lost == 1 {
		return targetRebuild
	}
	return 0
}

// report prints the run's tables and ratios.
func report(w io.Writer, o options, schemes []scheme, sizes []int64, enc encodeRates, stream time.Duration,
	results map[string][]*sizeResult) {
	fmt.Fprintf(w, "\nscrfs redundancy, %d daemons in one set on %s–%s, caches in %s; one file of B bytes per node written through the mounts (1 MiB writes); median [min–max] of %d rounds after an untimed warm-up\n",
		o.nodes, loopback.IP(0), loopback.IP(o.nodes-1), o.dir, o.rounds)
	if o.link != "" {
		fmt.Fprintf(w, "links shaped (-link): what each node's address receives is capped at %s by an HTB qdisc on lo, for every figure below\n", o.link)
	}

	full := sizes[len(sizes)-1]
	fmt.Fprintf(w, "\n(a) network bound: the bytes each scheme moves between the nodes (worked out from docs/formats-redundancy.md),\n"+
		"    pushed over loopback TCP by one plain process per node, one connection per pair of nodes between their addresses,\n"+
		"    a sender and a receiver goroutine per direction, all pairs at once, 1 MiB writes (\"one proc\": the same in one\n"+
		"    process, for reference). One stream alone between two processes: %s in %s = %s.\n"+
		"(c) (a) plus, at the same time, each node reading its checkpoint (B) from a file in %s and writing its\n"+
		"    redundancy share (partner r·B, xor ⌈B/(p−1)⌉, rs k·⌈B/(p−k)⌉) to a new file there, fsynced: all the bytes the\n"+
		"    scheme must move, moved by plain goroutines (no CRCs, no framing, no encoding).\n",
		job.FormatBytes(full), fmtDur(stream), job.FormatRate(full, stream), o.dir)
	tw := newTable(w)
	fmt.Fprint(tw, "scheme\teach node sends\twhere node 0's bytes go (B = "+job.FormatBytes(full)+")\t")
	for _, s := range sizes {
		fmt.Fprintf(tw, "B=%s: moved\t(a)\trate\tone proc\t(c)\t", job.FormatBytes(s))
	}
	fmt.Fprintln(tw)
	for _, sch := range schemes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t", sch, sch.formula(), schemeTraffic(sch, o.nodes, full).pattern())
		for _, r := range results[sch.String()] {
			d := job.Median(netbound.Walls(r.bound))
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t", job.FormatBytes(r.traffic.total()), fmtDur(d), job.FormatRate(r.traffic.total(), d),
				fmtDur(job.Median(netbound.Walls(r.bound1))), fmtDur(job.Median(netbound.Walls(r.boundIO))))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	fmt.Fprintf(w, "\n(b) in-process encode on one core, %s of input read from memory in 1 MiB pieces:\n", job.FormatBytes(enc.bytes))
	fmt.Fprintf(w, "    rs   reedsolomon.EncodeIdx, %d+%d code, %d checksum pieces per piece: %s/s\n", enc.p, enc.k, enc.k, job.FormatBytes(int64(enc.rs)))
	fmt.Fprintf(w, "    xor  crypto/subtle.XORBytes into an accumulator:                  %s/s\n", job.FormatBytes(int64(enc.xor)))
	for _, sch := range schemes {
		rate := map[string]float64{"rs": enc.rs, "xor": enc.xor}[sch.kind]
		res := results[sch.String()]
		if rate == 0 || len(res) == 0 || len(res[len(res)-1].bound) == 0 {
			continue
		}
		r := res[len(res)-1]
		netRate := float64(r.traffic.total()) / job.Median(netbound.Walls(r.bound)).Seconds()
		fmt.Fprintf(w, "    %-13s one core encodes %.1f× faster than the whole set's network bound moves its bytes (%s/s)\n",
			sch, rate/netRate, job.FormatBytes(int64(netRate)))
	}

	fmt.Fprintf(w, "\ntime to protected = latest \"dataset protected\" − earliest \"dataset complete\" across the nodes (daemons' log timestamps)\n")
	tw = newTable(w)
	fmt.Fprintln(tw, "scheme\tB\tprotected after\t(a)\t÷ (a)\ttarget\t\t(c)\t÷ (c)\t")
	for _, sch := range schemes {
		target := targetCoded
		if sch.kind == "partner" {
			target = targetPartner
		}
		for _, r := range results[sch.String()] {
			fmt.Fprintf(tw, "%s\t%s\t", sch, job.FormatBytes(r.size))
			if len(r.ttp) == 0 {
				fmt.Fprintf(tw, "failed\t\t\t\t\t\t\t\n")
				continue
			}
			a, c := job.Median(netbound.Walls(r.bound)), job.Median(netbound.Walls(r.boundIO))
			ratio := job.Median(r.ttp).Seconds() / a.Seconds()
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t≤ %.2f\t%s\t%s\t%.2f\t\n", job.FormatSpread(r.ttp), fmtDur(a), ratio, target, verdict(ratio, target),
				fmtDur(c), job.Median(r.ttp).Seconds()/c.Seconds())
		}
	}
	tw.Flush()

	fmt.Fprintf(w, "\nwhere the time goes (medians): the daemons' own encode time (longest \"seconds\" of their \"dataset protected\" lines),\n"+
		"the rest of the time to protected (completion spreading, readiness, verdict), CPU time (user+system) and page faults\n"+
		"of all daemons while protecting vs the benchmark's own for (a) and (c), and bytes sent per node as the daemons report\n"+
		"them vs the model\n")
	tw = newTable(w)
	fmt.Fprintln(tw, "scheme\tB\tencode\tother\tCPU: daemons\t(a)\t(c)\tpage faults: daemons\t(c)\tsent/node: daemons\tmodel\twrite through mounts\t")
	for _, sch := range schemes {
		for _, r := range results[sch.String()] {
			if len(r.ttp) == 0 {
				continue
			}
			enc := job.Median(r.encode)
			var cpu []time.Duration
			var flt []int64
			for _, u := range r.used {
				cpu, flt = append(cpu, u.CPU), append(flt, u.Faults)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n", sch, job.FormatBytes(r.size), fmtDur(enc), fmtDur(job.Median(r.ttp)-enc),
				fmtDur(job.Median(cpu)), fmtDur(job.Median(netbound.CPUs(r.bound))), fmtDur(job.Median(netbound.CPUs(r.boundIO))), job.Median(flt), job.Median(netbound.Faults(r.boundIO)),
				job.FormatBytes(int64(r.sent)), job.FormatBytes(r.traffic.maxSent()), job.FormatRate(r.size*int64(o.nodes), job.Median(r.write)))
		}
	}
	tw.Flush()

	fmt.Fprintf(w, "\nCPU per GiB protected: the daemons' CPU seconds (user+system, all nodes, completion to protected) per GiB of all\n"+
		"nodes' checkpoints, beside (c)'s, which moves the same bytes by plain goroutines without CRCs, framing or encoding;\n"+
		"and the write path's: CPU of the daemons and of the writers (this process) while the checkpoints went through the mounts\n")
	tw = newTable(w)
	fmt.Fprintln(tw, "scheme\tB\tdaemons\ttarget\t\t(c)\tdaemons ÷ (c)\twrite path (daemons + writers)\t")
	for _, sch := range schemes {
		for _, r := range results[sch.String()] {
			if len(r.ttp) == 0 {
				continue
			}
			var cpu []time.Duration
			for _, u := range r.used {
				cpu = append(cpu, u.CPU)
			}
			gib := float64(r.size) * float64(o.nodes) / (1 << 30)
			d, c := job.Median(cpu).Seconds()/gib, job.Median(netbound.CPUs(r.boundIO)).Seconds()/gib
			fmt.Fprintf(tw, "%s\t%s\t%.2f s/GiB\t≤ %.2f\t%s\t%.2f s/GiB\t%.2f\t%.2f s/GiB\t\n", sch, job.FormatBytes(r.size), d,
				targetCPU[sch.kind], verdict(d, targetCPU[sch.kind]), c, d/c, job.Median(r.writeCPU).Seconds()/gib)
		}
	}
	tw.Flush()

	reportRing(w, o, schemes, results)

	fmt.Fprintf(w, "\npeak RSS (VmHWM from /proc/PID/status) of each daemon after the last protect\n")
	tw = newTable(w)
	fmt.Fprint(tw, "scheme\t")
	for _, s := range sizes {
		fmt.Fprintf(tw, "B=%s: per node\tmax\t", job.FormatBytes(s))
	}
	if len(sizes) > 1 {
		fmt.Fprint(tw, "max ratio\t")
	}
	fmt.Fprintln(tw)
	for _, sch := range schemes {
		fmt.Fprintf(tw, "%s\t", sch)
		var maxes []int64
		for _, r := range results[sch.String()] {
			var per []string
			for _, v := range r.rss {
				per = append(per, fmtMiB(v))
			}
			m := slices.Max(append([]int64{0}, r.rss...))
			maxes = append(maxes, m)
			fmt.Fprintf(tw, "%s\t%s\t", strings.Join(per, " "), fmtMiB(m))
		}
		if len(maxes) > 1 && maxes[0] > 0 {
			fmt.Fprintf(tw, "%.2f (B ×%d)\t", float64(maxes[len(maxes)-1])/float64(maxes[0]), sizes[len(sizes)-1]/sizes[0])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	reportFetch(w, o, schemes, full, results)
	if !o.rebuild {
		return
	}
	fmt.Fprintf(w, "\nrebuild at B=%s: node(s) SIGKILLed, cache and control wiped, a replacement with the same index started on the same address;\n"+
		"rebuild = the replacement's \"rebuilding dataset\" → \"dataset rebuilt\"; encode = the median time to protected above; sha256 read back through the new mount\n", job.FormatBytes(full))
	tw = newTable(w)
	fmt.Fprintln(tw, "scheme\tlost\trebuild\tstart→rebuilt\tencode\trebuild ÷ encode\ttarget\t\tlost ranks seen\tsha256\treplacement RSS\t")
	for _, sch := range schemes {
		res := results[sch.String()]
		if len(res) == 0 {
			continue
		}
		r := res[len(res)-1]
		for _, rr := range r.rebuilds {
			fmt.Fprintf(tw, "%s\t%d\t", sch, rr.lost)
			if len(rr.spans) == 0 {
				fmt.Fprintf(tw, "failed\t\t\t\t\t\t\t\t\t\n")
				continue
			}
			ratio := job.Median(rr.spans).Seconds() / job.Median(r.ttp).Seconds()
			tgt, ok := "", ""
			if t := rebuildTarget(sch.kind, rr.lost); t > 0 {
				tgt, ok = fmt.Sprintf("≤ %.2f", t), verdict(ratio, t)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%d ok\t%s\t\n", job.FormatSpread(rr.spans), fmtDur(job.Median(rr.restarts)), fmtDur(job.Median(r.ttp)),
				ratio, tgt, ok, strings.Join(slices.Compact(slices.Sorted(slices.Values(rr.ops))), "; "), rr.verified, fmtMiB(slices.Max(rr.rss)))
		}
	}
	tw.Flush()
}

// reportFetch prints the cold fetch table (-fetch).
func reportFetch(w io.Writer, o options, schemes []scheme, full int64, results map[string][]*sizeResult) {
	if !o.fetch {
		return
	}
	where, bound, target := "a prefix in "+o.disk, "cp -r", targetFetch
	if o.s3 {
		where, bound, target = "S3 (versitygw on loopback over "+o.disk+")", "tm get", targetS3Fetch
	}
	fmt.Fprintf(w, "\ncold fetch at B=%s: the checkpoint flushed to %s, every daemon stopped, caches wiped, page cache dropped,\n"+
		"daemons started: node 0's \"fetching from the prefix\" → the latest \"dataset protected\" (fetch, CRC checks, re-encode),\n"+
		"and → the latest \"dataset fetched\" (the fetch alone: every node's files copied, checked and adopted);\n"+
		"beside them %s of the same files from the prefix into %s (page cache dropped) plus one encode (median time to protected above)\n",
		job.FormatBytes(full), where, bound, o.dir)
	if o.s3 {
		fmt.Fprintln(w, "(tm get: every node's objects fetched by one process with the AWS SDK's transfer manager, 4 transfers per node at once, bench/s3bound)")
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "scheme\tfetch + protect\tfetch alone\t÷ fetch\ttarget\t\t%s\tencode\t÷ (%s + encode)\ttarget\t\tpage cache dropped\t\n", bound, bound)
	for _, sch := range schemes {
		res := results[sch.String()]
		if len(res) == 0 || res[len(res)-1].fetch == nil || len(res[len(res)-1].fetch.spans) == 0 {
			continue
		}
		r := res[len(res)-1]
		f := r.fetch
		alone := job.Median(f.spans).Seconds() / job.Median(f.fetches).Seconds()
		ratio := job.Median(f.spans).Seconds() / (job.Median(f.cps) + job.Median(r.ttp)).Seconds()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t≤ %.2f\t%s\t%s\t%s\t%.2f\t≤ %.2f\t%s\t%v\t\n", sch, job.FormatSpread(f.spans), job.FormatSpread(f.fetches),
			alone, targetFetchProtect, verdict(alone, targetFetchProtect), job.FormatSpread(f.cps), fmtDur(job.Median(r.ttp)),
			ratio, target, verdict(ratio, target), f.dropped)
	}
	tw.Flush()
	reportRestartReads(w, schemes, results, bound)
	fmt.Fprintf(w, "rates over the %s of all nodes, and CPU per GiB (the daemons' from their start, with the re-encode; the %s process's):\n",
		job.FormatBytes(full*int64(o.nodes)), bound)
	tw = newTable(w)
	fmt.Fprintf(tw, "scheme\tfetch + protect\tfetch alone\t%s\tfetch ÷ %s rate\tdaemons CPU\t%s CPU\t\n", bound, bound, bound)
	gib := float64(full*int64(o.nodes)) / (1 << 30)
	for _, sch := range schemes {
		res := results[sch.String()]
		if len(res) == 0 || res[len(res)-1].fetch == nil || len(res[len(res)-1].fetch.cpu) == 0 {
			continue
		}
		f := res[len(res)-1].fetch
		all := full * int64(o.nodes)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%.2f s/GiB\t%.2f s/GiB\t\n", sch, job.FormatRate(all, job.Median(f.spans)),
			job.FormatRate(all, job.Median(f.fetches)), job.FormatRate(all, job.Median(f.cps)),
			job.Median(f.cps).Seconds()/job.Median(f.fetches).Seconds(), job.Median(f.cpu).Seconds()/gib, job.Median(f.cpCPU).Seconds()/gib)
	}
	tw.Flush()
	fmt.Fprintf(w, "where the time goes (medians): the fetch alone and the re-protect after it (the rest of the span, with the longest\n"+
		"encode a daemon reported), each with the daemons' CPU; their CPU together spread over this machine's %d cores is the\n"+
		"least time the two can take even if they overlap perfectly, beside the fetch alone\n", runtime.NumCPU())
	tw = newTable(w)
	fmt.Fprintf(tw, "scheme\tfetch alone\tdaemons CPU\tre-protect\tencode\tdaemons CPU\tCPU ÷ %d cores\t÷ fetch alone\t\n", runtime.NumCPU())
	for _, sch := range schemes {
		res := results[sch.String()]
		if len(res) == 0 || res[len(res)-1].fetch == nil || len(res[len(res)-1].fetch.fetchCPU) == 0 {
			continue
		}
		f := res[len(res)-1].fetch
		var rest, restCPU []time.Duration
		for i := range f.spans {
			rest = append(rest, f.spans[i]-f.fetches[i])
			restCPU = append(restCPU, f.cpu[i]-f.fetchCPU[i])
		}
		floor := job.Median(f.cpu) / time.Duration(runtime.NumCPU())
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t\n", sch, fmtDur(job.Median(f.fetches)), fmtDur(job.Median(f.fetchCPU)),
			fmtDur(job.Median(rest)), fmtDur(job.Median(f.encodes)), fmtDur(job.Median(restCPU)), fmtDur(floor),
			floor.Seconds()/job.Median(f.fetches).Seconds())
	}
	tw.Flush()
	reportFetchModel(w, o, schemes, results)
}

// reportFetchModel prints (f0) and (f): what a cold restart's fetch costs
// by plain goroutines, alone and feeding XOR's ring as its bytes land,
// beside the daemons' fetch + protect ÷ fetch alone.
func reportFetchModel(w io.Writer, o options, schemes []scheme, results map[string][]*sizeResult) {
	rows := rowsWhere(schemes, results, func(r *sizeResult) bool { return len(r.fetchFed) > 0 })
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "(f0) a cold restart's fetch by plain goroutines, one process per node: each node reads its checkpoint from a copy\n"+
		"     in %s (page cache dropped before each run) in p−1 streams of %s pieces, takes the CRC32C of every byte (what\n"+
		"     a fetch checks) and writes it into a staged copy in %s, new each run.\n"+
		"(f)  the same fetch feeding (d)'s ring the bytes as they land: an encode fed by the fetch, overlapped with it,\n"+
		"     nothing read back or checked twice: the least a cold restart's fetch and re-protect cost here together.\n"+
		"     Run in turn with (c) round by round; (f) ÷ (f0) is the median of the rounds' ratios. (f) − (f0) is the least\n"+
		"     time a re-protect adds to a fetch here: added to the daemons' own fetch alone, the least their ratio can be\n",
		o.disk, job.FormatBytes(int64(config.Default().Redundancy.PieceSize)), o.dir)
	tw := newTable(w)
	fmt.Fprintln(tw, "scheme\tB\t(f0)\t(f)\t(f) ÷ (f0)\tdaemons: fetch + protect ÷ fetch alone\tleast\ttarget\tCPU per GiB: (f0)\t(f)\t(f) ÷ (f0)\t")
	for _, r := range rows {
		gib := float64(r.size) * float64(o.nodes) / (1 << 30)
		a, f := netbound.Walls(r.fetch0), netbound.Walls(r.fetchFed)
		ac, fc := netbound.CPUs(r.fetch0), netbound.CPUs(r.fetchFed)
		daemons, least := "–", "–"
		if r.fetch != nil && len(r.fetch.spans) > 0 {
			alone := job.Median(r.fetch.fetches)
			daemons = fmt.Sprintf("%.2f", job.Median(r.fetch.spans).Seconds()/alone.Seconds())
			least = fmt.Sprintf("%.2f", (alone+job.Median(f)-job.Median(a)).Seconds()/alone.Seconds())
		}
		fmt.Fprintf(tw, "xor\t%s\t%s\t%s\t%.2f\t%s\t%s\t≤ %.2f\t%.2f s\t%.2f s\t%.2f\t\n", job.FormatBytes(r.size),
			fmtDur(job.Median(a)), fmtDur(job.Median(f)), pairedRatio(f, a), daemons, least, targetFetchProtect,
			job.Median(ac).Seconds()/gib, job.Median(fc).Seconds()/gib, pairedRatio(fc, ac))
	}
	tw.Flush()
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

func verdict(ratio, target float64) string {
	if ratio <= target {
		return "met"
	}
	return "MISSED"
}

func fmtMiB(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// reportRestartReads prints the cold restart as the ranks see it.
func reportRestartReads(w io.Writer, schemes []scheme, results map[string][]*sizeResult, bound string) {
	fmt.Fprintf(w, "the same restarts as the application sees them: from the daemons' start, every node's rank opens its own file\n"+
		"through its mount once the mount is there (the slowest rank); beside it %s, then the same files read from the copy\n", bound)
	tw := newTable(w)
	fmt.Fprintf(tw, "scheme\tfirst byte\ttarget\t\tfile read\t%s + read\t÷\ttarget\t\t\n", bound)
	for _, sch := range schemes {
		res := results[sch.String()]
		if len(res) == 0 || res[len(res)-1].fetch == nil || len(res[len(res)-1].fetch.reads) == 0 {
			continue
		}
		f := res[len(res)-1].fetch
		var first, all []time.Duration
		for _, r := range f.reads {
			first, all = append(first, r.first), append(all, r.all)
		}
		ratio := job.Median(all).Seconds() / job.Median(f.cpReads).Seconds()
		fmt.Fprintf(tw, "%s\t%s\t≤ %s\t%s\t%s\t%s\t%.2f\t≤ %.2f\t%s\t\n", sch, job.FormatSpread(first), fmtDur(targetFirstByte),
			verdict(job.Median(first).Seconds(), targetFirstByte.Seconds()), job.FormatSpread(all), job.FormatSpread(f.cpReads),
			ratio, targetReadAll, verdict(ratio, targetReadAll))
	}
	tw.Flush()
}

// reportRing prints (c′), the checks every encode makes, and (d), XOR's
// ring by plain goroutines, beside (c) and the daemons: how far any
// encode with scrfs's checks, and XOR's own work, sit above (c) on this
// machine, and the daemons above that.
func reportRing(w io.Writer, o options, schemes []scheme, results map[string][]*sizeResult) {
	rows := rowsWhere(schemes, results, func(r *sizeResult) bool { return len(r.ring) > 0 && len(r.ttp) > 0 })
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n(c′) (c) with the checks every scrfs encode makes and nothing of the scheme's algorithm: the same streams over\n"+
		"    copies of (c)'s checkpoints written anew before each run (as a checkpoint is just written when its encode reads\n"+
		"    it), with the CRC32C of every byte read and of every byte written: the least any XOR encode with scrfs's checks\n"+
		"    costs here, whatever its algorithm, but for the XOR itself.\n"+
		"(d) XOR's own work by plain goroutines: its ring (redset's pipelined reduce-scatter in %s pieces, a sender\n"+
		"    goroutine per node) over such copies, with the CRC32C of every byte read and of the finished parity and the XOR\n"+
		"    of every partial sum, the parity spliced into a new file: the least XOR's encode with scrfs's checks costs here.\n"+
		"    Run in turn with (c), round by round; X ÷ (c) is the median of the rounds' ratios\n",
		job.FormatBytes(int64(config.Default().Redundancy.PieceSize)))
	tw := newTable(w)
	fmt.Fprintln(tw, "scheme\tB\t(c)\t(c′)\t(c′) ÷ (c)\t(d)\t(d) ÷ (c)\tdaemons ÷ (d)\tCPU per GiB: (c)\t(c′)\t(c′) ÷ (c)\t(d)\t(d) ÷ (c)\tdaemons ÷ (d)\t")
	for _, r := range rows {
		gib := float64(r.size) * float64(o.nodes) / (1 << 30)
		c, k, d := netbound.Walls(r.boundIO), netbound.Walls(r.checked), netbound.Walls(r.ring)
		cc, kc, dc := netbound.CPUs(r.boundIO), netbound.CPUs(r.checked), netbound.CPUs(r.ring)
		var cpu []time.Duration
		for _, u := range r.used {
			cpu = append(cpu, u.CPU)
		}
		perGiB := func(v []time.Duration) float64 { return job.Median(v).Seconds() / gib }
		fmt.Fprintf(tw, "xor\t%s\t%s\t%s\t%.2f\t%s\t%.2f\t%.2f\t%.2f s\t%.2f s\t%.2f\t%.2f s\t%.2f\t%.2f\t\n", job.FormatBytes(r.size),
			fmtDur(job.Median(c)), fmtDur(job.Median(k)), pairedRatio(k, c), fmtDur(job.Median(d)), pairedRatio(d, c),
			job.Median(r.ttp).Seconds()/job.Median(d).Seconds(),
			perGiB(cc), perGiB(kc), pairedRatio(kc, cc), perGiB(dc), pairedRatio(dc, cc), perGiB(cpu)/perGiB(dc))
	}
	tw.Flush()
}

// rowsWhere returns the results, scheme by scheme and size by size, that
// keep says to print.
func rowsWhere(schemes []scheme, results map[string][]*sizeResult, keep func(*sizeResult) bool) []*sizeResult {
	var rows []*sizeResult
	for _, sch := range schemes {
		for _, r := range results[sch.String()] {
			if keep(r) {
				rows = append(rows, r)
			}
		}
	}
	return rows
}

// pairedRatio is the median of a[i] ÷ b[i].
func pairedRatio(a, b []time.Duration) float64 {
	var v []float64
	for i := range min(len(a), len(b)) {
		v = append(v, a[i].Seconds()/b[i].Seconds())
	}
	return job.Median(v)
}
