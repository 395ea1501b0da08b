package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/bench/internal/netbound"
	"github.com/scrfs/scrfs/config"
)

// bench holds what every measurement of one run shares.
type bench struct {
	o      options
	bin    string // the scrfs binary
	work   string // scratch directory under -dir, removed at the end
	disk   string // scratch directory under -disk (prefixes), removed at the end
	port   int    // the daemons' peer port on every loopback address
	pay    *payload
	net    *netbound.InProc // the bounds in this process (reference)
	procs  netbound.Procs   // the bounds with one process per node
	s3     *s3run           // -s3: the object store and the transfer manager program
	status io.Writer        // progress lines
	echo   io.Writer        // daemons' warnings and errors (with -v), else nil
}

// sizeResult is what one scheme measured at one checkpoint size.
type sizeResult struct {
	size     int64
	traffic  traffic
	bound    []netbound.Sample // (a) the network alone, one process per node, per measured round
	bound1   []netbound.Sample // (a) in this one process, for reference
	boundIO  []netbound.Sample // (c) the network and the cache reads and writes together
	checked  []netbound.Sample // (c′) XOR only: (c) with the CRC32Cs every encode takes, over checkpoints just written
	ring     []netbound.Sample // (d) XOR only: its ring by plain goroutines, with its CRCs and XOR
	fetch0   []netbound.Sample // (f0) XOR at the full size with -fetch, as root: a fetch from disk by plain goroutines
	fetchFed []netbound.Sample // (f) the same fetch feeding (d)'s ring as the bytes land
	ttp      []time.Duration   // time to protected, per measured round
	encode   []time.Duration   // the longest encode a daemon reported ("seconds"), per round
	used     []job.Usage       // CPU time and page faults of all daemons while protecting, per round
	write    []time.Duration   // writing the checkpoint through the mounts
	writeCPU []time.Duration   // CPU of the daemons and of the writers (this process) meanwhile
	sent     float64           // bytes a daemon said it sent in the last encode (mean over nodes)
	rss      []int64           // VmHWM per node after the last protect
	rebuilds []*rebuildResult
	fetch    *fetchResult // at the full size with -fetch
	err      error        // why the measurement stopped, if it did
}

// rebuildResult is the rebuild of a number of nodes lost at once.
type rebuildResult struct {
	lost     int
	spans    []time.Duration // earliest "rebuilding dataset" → latest "dataset rebuilt" of the replacements
	restarts []time.Duration // replacement started → its "dataset rebuilt"
	ops      []string        // the lost ranks each replacement's rebuild named
	rss      []int64         // the replacements' VmHWM after their rebuild
	verified int             // rebuilt files whose sha256 matched
	err      error
}

// progress prints a progress line.
func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.status, format+"\n", args...)
}

// runSize measures scheme sch with checkpoints of size bytes per node:
// the network bound, then a cluster of daemons for the time to protected
// and the peak RSS, and at the full size the cold fetch and the rebuilds.
func (b *bench) runSize(ctx context.Context, sch scheme, size int64, full bool) *sizeResult {
	res := &sizeResult{size: size, traffic: schemeTraffic(sch, b.o.nodes, size)}
	if res.err = b.bounds(ctx, sch, res, full); res.err != nil {
		return res
	}

	dir := filepath.Join(b.work, fmt.Sprintf("%s-%d", sch.kind, size))
	settings := b.o.settings
	pfx := filepath.Join(b.disk, fmt.Sprintf("%s-%d", sch.kind, size))
	if b.s3 != nil {
		pfx = b.s3.srv.Prefix(fmt.Sprintf("%s-%d", sch.kind, size))
	}
	if full && b.o.fetch {
		// A prefix of its own: another cluster's index would make this
		// one fetch at its first start.
		settings = append([]string{"SCRFS_PATHS_PREFIX=" + pfx,
			"SCRFS_PREFIX_KEY_FILE=" + filepath.Join(b.disk, "prefix.key")}, settings...)
		if b.s3 == nil {
			defer os.RemoveAll(pfx)
		}
	}
	c, err := newCluster(b.bin, dir, b.o.nodes, b.port, sch, settings, b.echo)
	if err != nil {
		res.err = err
		return res
	}
	defer func() {
		c.Stop()
		os.RemoveAll(dir) // clean up between schemes: /dev/shm is RAM
	}()
	if err := c.Start(ctx); err != nil {
		res.err = err
		return res
	}
	var mounts []string
	for _, n := range c.Nodes {
		mounts = append(mounts, n.Mount)
	}
	var last string
	for r := 0; r <= b.o.rounds; r++ {
		rd, err := b.encodeRound(ctx, c, mounts, sch, size, r, "")
		if err != nil {
			res.err = err
			return res
		}
		res.sent = rd.sent
		if r > 0 {
			res.ttp = append(res.ttp, rd.ttp)
			res.encode = append(res.encode, rd.encode)
			res.used = append(res.used, rd.used)
			res.write = append(res.write, rd.wrote)
			res.writeCPU = append(res.writeCPU, rd.writeCPU)
		}
		last = rd.name
	}
	for _, n := range c.Nodes {
		rss, err := n.PeakRSS()
		if err != nil {
			res.err = err
			return res
		}
		res.rss = append(res.rss, rss)
	}
	if full && b.o.fetch {
		if res.fetch = b.coldFetch(ctx, c, pfx, last, size); res.fetch.err != nil {
			res.err = res.fetch.err
			return res
		}
	}
	if !full || !b.o.rebuild {
		return res
	}
	for _, lost := range sch.losses() {
		rr := b.rebuild(ctx, c, sch, last, size, lost)
		res.rebuilds = append(res.rebuilds, rr)
		if rr.err != nil {
			break // the cluster is in an unknown state
		}
	}
	return res
}

// round is what one checkpoint measured: written through the mounts,
// then protected.
type round struct {
	name     string
	wrote    time.Duration // writing it through the mounts
	writeCPU time.Duration // CPU of the daemons and the writers meanwhile
	ttp      time.Duration // time to protected
	encode   time.Duration // the longest encode a daemon reported
	used     job.Usage     // the daemons' CPU and page faults while protecting
	sent     float64       // bytes a daemon said it sent (mean over nodes)
}

// encodeRound writes checkpoint ckpt.<r> (r 0 is the warm-up) through the
// mounts of c, completes it and waits until it is protected, printing a
// progress line (label, if any, names the job in it).
func (b *bench) encodeRound(ctx context.Context, c *job.Cluster, mounts []string, sch scheme, size int64, r int, label string) (round, error) {
	rd := round{name: fmt.Sprintf("ckpt.%d", r)}
	w0, err := c.Usage()
	if err != nil {
		return rd, err
	}
	self0 := selfCPU()
	t0 := time.Now()
	if err := b.pay.writeAll(mounts, rd.name, size); err != nil {
		return rd, err
	}
	rd.wrote = time.Since(t0)
	self1 := selfCPU()
	u0, err := c.Usage()
	if err != nil {
		return rd, err
	}
	rd.writeCPU = u0.CPU - w0.CPU + self1 - self0
	ttp, prot, err := b.protect(ctx, c, rd.name, size)
	if err != nil {
		return rd, err
	}
	u1, err := c.Usage()
	if err != nil {
		return rd, err
	}
	// The checkpoint this one evicted is deleted once it is protected;
	// that must not run into the next measurement (this job's next round,
	// or in -ab the other job's turn, which it would slow).
	if err := c.AwaitDeleted(ctx, jobID); err != nil {
		return rd, err
	}
	var sent, enc float64
	for _, ev := range prot {
		sent += ev.Num("sent")
		enc = max(enc, ev.Num("seconds"))
	}
	rd.sent = sent / float64(len(prot))
	rd.ttp, rd.encode, rd.used = ttp, time.Duration(enc*float64(time.Second)), u1.Sub(u0)
	tag := "warm-up"
	if r > 0 {
		tag = fmt.Sprintf("round %d", r)
	}
	if label != "" {
		tag = label + " " + tag
	}
	b.progress("%-13s B=%-8s %-8s write %s; protected %s after completion (encode %s, daemons' CPU %s, %d page faults)",
		sch, job.FormatBytes(size), tag, fmtDur(rd.wrote), fmtDur(ttp), fmtDur(rd.encode), fmtDur(rd.used.CPU), rd.used.Faults)
	return rd, nil
}

// bounds measures (a), the scheme's traffic alone over loopback (one
// process per node, and for reference all in this process), and (c), the
// same with each node's cache reads and writes, into res; for XOR also
// (c′) and (d), and at the full size (f0) and (f) (fetchModel).
func (b *bench) bounds(ctx context.Context, sch scheme, res *sizeResult, full bool) error {
	var err error
	t := netbound.Traffic(res.traffic)
	if res.bound, err = netbound.Measure(ctx, b.procs, t, nil, b.o.rounds); err != nil {
		return err
	}
	if res.bound1, err = netbound.Measure(ctx, b.net, t, nil, b.o.rounds); err != nil {
		return err
	}
	p := b.o.nodes
	lio, err := netbound.NewLocal(filepath.Join(b.work, "localio"), p, sch.reads(p, res.size), sch.stores(p, res.size), b.net.Buffers(1)[0])
	if err != nil {
		return err
	}
	defer lio.Close()
	lios := []*netbound.Local{lio}
	if sch.kind == "xor" {
		params := netbound.XORRing{Chunk: ceilDiv(res.size, int64(p-1)), Piece: int(config.Default().Redundancy.PieceSize)}
		ring, err := lio.WithXORRing(params)
		if err != nil {
			return err
		}
		checked, err := lio.WithChecks()
		if err != nil {
			return err
		}
		lios = append(lios, checked, ring)
		if full && b.fetchModel() {
			disk := filepath.Join(b.disk, "fetch-model")
			if err := os.MkdirAll(disk, 0o755); err != nil {
				return err
			}
			defer os.RemoveAll(disk)
			fed, alone, err := lio.WithFetch(disk, params)
			if err != nil {
				return err
			}
			lios = append(lios, alone, fed)
		}
	}
	samples, err := netbound.MeasureEach(ctx, b.procs, t, lios, b.o.rounds)
	if err != nil {
		return err
	}
	res.boundIO = samples[0]
	if len(samples) > 2 {
		res.checked, res.ring = samples[1], samples[2]
	}
	if len(samples) > 4 {
		res.fetch0, res.fetchFed = samples[3], samples[4]
	}
	b.progress("%-13s B=%-8s (a) network bound %s for %s (in one process %s); (c) with the cache I/O %s",
		sch, job.FormatBytes(res.size), fmtDur(job.Median(netbound.Walls(res.bound))), job.FormatBytes(res.traffic.total()),
		fmtDur(job.Median(netbound.Walls(res.bound1))), fmtDur(job.Median(netbound.Walls(res.boundIO))))
	return nil
}

// fetchModel says whether (f0) and (f) are measured: with -fetch from a
// directory prefix, as root, who alone may drop the page cache between
// their runs.
func (b *bench) fetchModel() bool {
	return b.o.fetch && !b.o.s3 && os.Geteuid() == 0
}

// protect completes dataset name with a marker on node 0 and waits until
// every node logged it protected. The time to protected is the latest
// "dataset protected" minus the earliest "dataset complete", both as the
// daemons stamped them.
func (b *bench) protect(ctx context.Context, c *job.Cluster, name string, size int64) (time.Duration, []job.Event, error) {
	if err := os.WriteFile(filepath.Join(c.Nodes[0].Mount, name, "COMPLETE"), nil, 0o644); err != nil {
		return 0, nil, err
	}
	// Generous: a few MiB/s would still finish; a hang must not last forever.
	timeout := time.Minute + time.Duration(size*int64(len(c.Nodes))/(20<<20))*time.Second
	prot, err := c.WaitAll(ctx, timeout, job.IsEvent("dataset protected", name), job.OutcomeOf(name))
	if err != nil {
		return 0, nil, fmt.Errorf("%s not protected: %w", name, err)
	}
	var first, lastProt time.Time
	for i, n := range c.Nodes {
		comp := n.Log().All(job.IsEvent("dataset complete", name))
		if len(comp) == 0 {
			return 0, nil, fmt.Errorf("node %d: protected %s without a \"dataset complete\" line", i, name)
		}
		if first.IsZero() || comp[0].Time.Before(first) {
			first = comp[0].Time
		}
		if prot[i].Time.After(lastProt) {
			lastProt = prot[i].Time
		}
	}
	return lastProt.Sub(first), prot, nil
}

// rebuildRound loses `lost` nodes at once (the r-th set of them), starts
// their replacements, waits until they rebuilt dataset ds, checks the
// rebuilt files' sha256 and adds the figures to rr.
func (b *bench) rebuildRound(ctx context.Context, c *job.Cluster, sch scheme, ds string, size int64, lost, r int, rr *rebuildResult, label string) error {
	p := len(c.Nodes)
	timeout := 2*time.Minute + time.Duration(size*int64(lost)/(10<<20))*time.Second
	var victims []int
	for j := range lost {
		victims = append(victims, (r+j+1)%p)
	}
	for _, v := range victims {
		if err := c.Kill(v); err != nil {
			return fmt.Errorf("wipe node %d: %w", v, err)
		}
	}
	for _, v := range victims {
		if err := c.Spawn(c.Nodes[v]); err != nil {
			return err
		}
	}
	var begin, end time.Time
	var restart time.Duration
	var ops []string
	for _, v := range victims {
		n := c.Nodes[v]
		wctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := n.Log().Wait(wctx, func(e job.Event) bool { return e.Is("rebuilding dataset", ds) && e.Flag("restoring_here") }, job.OutcomeOf(ds))
		var done job.Event
		if err == nil {
			done, err = n.Log().Wait(wctx, func(e job.Event) bool { return e.Is("dataset rebuilt", ds) && e.Flag("restored_here") }, job.OutcomeOf(ds))
		}
		cancel()
		if err == nil {
			err = c.Ready(ctx, n)
		}
		if err != nil {
			return fmt.Errorf("rebuild of node %d: %w\n%s", v, err, n.Log().Tail(15))
		}
		if begin.IsZero() || st.Time.Before(begin) {
			begin = st.Time
		}
		if done.Time.After(end) {
			end = done.Time
		}
		restart = max(restart, done.Time.Sub(n.Started()))
		ops = append(ops, fmt.Sprint(st.Attrs["lost"]))
		rss, err := n.PeakRSS()
		if err != nil {
			return err
		}
		rr.rss = append(rr.rss, rss)
	}
	for _, v := range victims {
		if err := b.pay.verify(filepath.Join(c.Nodes[v].Mount, ds, fileName(v)), v, size); err != nil {
			return fmt.Errorf("node %d after rebuild: %w", v, err)
		}
		rr.verified++
	}
	rr.spans = append(rr.spans, end.Sub(begin))
	rr.restarts = append(rr.restarts, restart)
	slices.Sort(ops)
	seen := strings.Join(slices.Compact(ops), " ")
	rr.ops = append(rr.ops, seen)
	tag := ""
	if label != "" {
		tag = label + " "
	}
	b.progress("%-13s B=%-8s %srebuild of node(s) %v: %s (lost ranks %s), %s from start; sha256 ok",
		sch, job.FormatBytes(size), tag, victims, fmtDur(end.Sub(begin)), seen, fmtDur(restart))
	return nil
}

// rebuild loses `lost` nodes at once, -rounds times (a different set of
// nodes each time), and times how long their replacements take to get
// dataset ds back; each rebuilt file is read through the replacement's
// mount and checked against its sha256.
func (b *bench) rebuild(ctx context.Context, c *job.Cluster, sch scheme, ds string, size int64, lost int) *rebuildResult {
	rr := &rebuildResult{lost: lost}
	for r := range b.o.rounds {
		if err := b.rebuildRound(ctx, c, sch, ds, size, lost, r, rr, ""); err != nil {
			rr.err = err
			return rr
		}
	}
	return rr
}
