package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/record"
)

// scaleFile is what every node writes into each dataset of the
// control-plane measurement: small, so that the control plane is what is
// timed.
const scaleFile = 4 << 10

// scaleResult is the control plane of a job of nodes daemons.
type scaleResult struct {
	nodes    int
	visible  []time.Duration // COMPLETE closed on node 0 → the last node's mount shows every file
	round    []time.Duration // node 0's completion round ("dataset complete job-wide" seconds)
	datasets int             // measured
	// per node, over the measured datasets: requests sent and received
	// (scrfs_peer_requests_total), by kind; bytes sent and received over
	// the peer links.
	reqs  []map[string]float64
	bytes []float64
	// recordBytes is the size of the last dataset's record, which lists
	// nodes+1 files.
	recordBytes int64
}

// perNode returns node i's requests (sent and received) per dataset.
func (r *scaleResult) perNode(i int) float64 {
	var n float64
	for _, v := range r.reqs[i] {
		n += v
	}
	return n / float64(r.datasets)
}

// others returns the median and the largest requests per dataset of the
// nodes other than 0.
func (r *scaleResult) others() (median, most float64) {
	var v []float64
	for i := 1; i < r.nodes; i++ {
		v = append(v, r.perNode(i))
	}
	return job.Median(v), slices.Max(v)
}

// scale times datasets on a job of c's size: node 0 makes the directory
// (every node shows it before mkdir returns), every node writes one small
// file, node 0 writes COMPLETE; the time runs from COMPLETE's close until
// every node's mount lists every file (polled one node after the other).
// The requests every daemon sent and received over the measured datasets
// (after one warm-up) are its messages.
func (b *bench) scale(ctx context.Context, c *job.Cluster) (*scaleResult, error) {
	n := len(c.Nodes)
	res := &scaleResult{nodes: n, datasets: b.o.scaleDatasets}
	var before []job.Metrics
	for k := 0; k <= b.o.scaleDatasets; k++ {
		ds := fmt.Sprintf("cp.%d", k)
		if err := os.Mkdir(filepath.Join(c.Nodes[0].Mount, ds), 0o755); err != nil {
			return res, err
		}
		if _, err := timeAll(n, func(i int) error {
			return b.write(filepath.Join(c.Nodes[i].Mount, ds), map[string]int64{"f" + strconv.Itoa(i): scaleFile}, "")
		}); err != nil {
			return res, err
		}
		if err := b.write(filepath.Join(c.Nodes[0].Mount, ds), nil, "COMPLETE"); err != nil {
			return res, err
		}
		t0 := time.Now()
		for _, nd := range c.Nodes {
			dir := filepath.Join(nd.Mount, ds)
			if err := job.Poll(ctx, func() (bool, error) { return lists(dir, n+1) }); err != nil {
				return res, fmt.Errorf("node %d never showed all of %s: %w", nd.Index, ds, err)
			}
		}
		visible := time.Since(t0)
		if err := settled(ctx, c, ds); err != nil {
			return res, err
		}
		ev, err := c.Nodes[0].Log().Wait(ctx, job.IsEvent("dataset complete job-wide", ds), nil)
		if err != nil {
			return res, err
		}
		round := time.Duration(ev.Num("seconds") * float64(time.Second))
		b.progress("scale  %2d nodes %-8s visible everywhere %s after COMPLETE (node 0's round %s)", n, roundName(k), fmtSec(visible), fmtSec(round))
		if k == 0 {
			if before, err = scrapeAll(ctx, c); err != nil {
				return res, err
			}
			continue
		}
		res.visible, res.round = append(res.visible, visible), append(res.round, round)
		if k == b.o.scaleDatasets {
			st, err := os.Stat(filepath.Join(c.Nodes[0].CacheDir(jobID), ds, ".scrfs", record.File))
			if err != nil {
				return res, err
			}
			res.recordBytes = st.Size()
		}
	}
	after, err := scrapeAll(ctx, c)
	if err != nil {
		return res, err
	}
	for i := range c.Nodes {
		res.reqs = append(res.reqs, job.Diff(before[i].By("scrfs_peer_requests_total", "kind"), after[i].By("scrfs_peer_requests_total", "kind")))
		var bytes float64
		for _, m := range []string{"scrfs_peer_sent_bytes_total", "scrfs_peer_received_bytes_total"} {
			bytes += after[i].Sum(m) - before[i].Sum(m)
		}
		res.bytes = append(res.bytes, bytes/float64(res.datasets))
	}
	return res, nil
}

// lists reports whether directory dir lists want entries.
func lists(dir string, want int) (bool, error) {
	f, err := os.Open(dir)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return len(names) >= want, err
}

// scrapeAll scrapes every node's metrics.
func scrapeAll(ctx context.Context, c *job.Cluster) ([]job.Metrics, error) {
	var out []job.Metrics
	for _, n := range c.Nodes {
		m, err := n.Metrics(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
