package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// fetchResult is the cold restart from the prefix: the full-size
// checkpoint flushed to a prefix on disk, every daemon stopped and wiped,
// the page cache dropped, the daemons started again; they fetch the
// checkpoint and protect it anew. Beside it, cp -r of the same files from
// the prefix into -dir, with the page cache dropped too.
type fetchResult struct {
	spans   []time.Duration // node 0's "fetching from the prefix" → latest "dataset protected"
	fetches []time.Duration // node 0's "fetching from the prefix" → latest "dataset fetched": the fetch alone
	encodes []time.Duration // the longest encode a daemon reported after the fetch
	// fetchCPU is the daemons' CPU time from their start until every node
	// logged "dataset fetched" (the re-protect's first steps may be in it).
	fetchCPU []time.Duration
	cps      []time.Duration // cp -r of the dataset's prefix directory into -dir
	cpu      []time.Duration // the daemons' CPU time from their start to the latest "dataset protected"
	cpCPU    []time.Duration // the baseline's CPU time
	reads    []readTimes     // every rank's own file read through its mount, from the daemons' start (slowest rank)
	cpReads  []time.Duration // cp -r, then the same files read from the copy
	dropped  bool            // the page cache could be dropped before each
	err      error
}

// coldFetch flushes dataset ds (protected on every node of c) to the
// cluster's prefix pfx, then -rounds times restarts the whole cluster from
// nothing and times the fetch with its re-protect, and cp -r.
func (b *bench) coldFetch(ctx context.Context, c *job.Cluster, pfx, ds string, size int64) *fetchResult {
	fr := &fetchResult{dropped: true}
	flush := c.Command(ctx, c.Nodes[0], "flush", "--wait", ds)
	if out, err := flush.CombinedOutput(); err != nil {
		fr.err = fmt.Errorf("scrfs flush --wait %s: %w\n%s", ds, err, out)
		return fr
	}
	timeout := 2*time.Minute + time.Duration(size*int64(len(c.Nodes))/(10<<20))*time.Second
	for r := range b.o.rounds {
		c.Stop()
		for _, n := range c.Nodes {
			if err := wipe(n); err != nil {
				fr.err = err
				return fr
			}
		}
		fr.dropped = job.DropPageCache() == nil && fr.dropped
		rctx, stopReads := context.WithTimeout(ctx, timeout)
		reads := b.readThrough(rctx, c, ds, time.Now())
		if err := c.Start(ctx); err != nil {
			stopReads()
			reads()
			fr.err = err
			return fr
		}
		wctx, cancel := context.WithTimeout(ctx, timeout)
		began, err := c.Nodes[0].Log().Wait(wctx, job.IsEvent("fetching from the prefix", ds), nil)
		var fetched, prot []job.Event
		var atFetched job.Usage
		if err == nil {
			fetched, err = c.WaitAll(wctx, timeout, job.IsEvent("dataset fetched", ds), job.OutcomeOf(ds))
		}
		if err == nil {
			atFetched, err = c.Usage()
		}
		if err == nil {
			prot, err = c.WaitAll(wctx, timeout, job.IsEvent("dataset protected", ds), job.OutcomeOf(ds))
		}
		cancel()
		if err != nil {
			stopReads()
		}
		rt, rerr := reads()
		stopReads()
		if err != nil {
			fr.err = fmt.Errorf("fetch of %s: %w", ds, err)
			return fr
		}
		if rerr != nil {
			fr.err = fmt.Errorf("read %s through the mounts after the restart: %w", ds, rerr)
			return fr
		}
		fr.reads = append(fr.reads, rt)
		fr.spans = append(fr.spans, latest(prot).Sub(began.Time))
		fr.fetches = append(fr.fetches, latest(fetched).Sub(began.Time))
		fr.fetchCPU = append(fr.fetchCPU, atFetched.CPU)
		var enc float64
		for _, e := range prot {
			enc = max(enc, e.Num("seconds"))
		}
		fr.encodes = append(fr.encodes, time.Duration(enc*float64(time.Second)))
		u, err := c.Usage()
		if err != nil {
			fr.err = err
			return fr
		}
		fr.cpu = append(fr.cpu, u.CPU)

		dst := filepath.Join(b.work, "cp-fetch")
		fr.dropped = job.DropPageCache() == nil && fr.dropped
		cmd := exec.CommandContext(ctx, "cp", "-r", filepath.Join(pfx, ds), dst)
		if b.s3 != nil {
			cmd = b.s3.download(ctx, len(c.Nodes), pfx+"/"+ds, dst)
		}
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		fr.cps = append(fr.cps, time.Since(t0))
		if st := cmd.ProcessState; st != nil {
			fr.cpCPU = append(fr.cpCPU, st.UserTime()+st.SystemTime())
		}
		if err == nil {
			err = b.readCopies(dst)
			fr.cpReads = append(fr.cpReads, time.Since(t0))
		}
		os.RemoveAll(dst)
		if err != nil {
			fr.err = fmt.Errorf("%s: %w\n%s", cmd.Args[0], err, out)
			return fr
		}
		b.progress("%-13s B=%-8s round %d  cold fetch + protect %s (fetched after %s; every rank's first byte %s, file read %s); cp -r %s (+ read %s)",
			"fetch", job.FormatBytes(size), r+1, fmtDur(fr.spans[r]), fmtDur(fr.fetches[r]), fmtDur(rt.first), fmtDur(rt.all),
			fmtDur(fr.cps[r]), fmtDur(fr.cpReads[r]))
	}
	return fr
}

// latest returns the time of the latest of events.
func latest(events []job.Event) time.Time {
	var t time.Time
	for _, e := range events {
		if e.Time.After(t) {
			t = e.Time
		}
	}
	return t
}

// wipe removes a stopped node's cache and control directories.
func wipe(n *job.Node) error {
	if err := os.RemoveAll(n.CacheBase); err != nil {
		return err
	}
	return os.RemoveAll(n.ControlBase)
}
