package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// targetCreate is issue 29's target: new-file creates of one-file-per-rank
// checkpoints at least 0.8× the rate of the build before the job-wide
// names, side by side.
const targetCreate = 0.8

// createResult is the create measurement's rounds: the seconds every node
// took for its files, per build.
type createResult struct {
	perNode    int
	this, base []time.Duration // the slowest node's time, per round
	baseBin    string
}

// creates measures new-file creates of a one-file-per-rank checkpoint: on
// a job of -nodes daemons, every node creates -creates files of
// -file-size, one after another as a rank writes its files, all nodes at
// once, into a new dataset per round; with -base, beside the same on a
// job of the older build, the two builds taking turns round by round.
func (b *bench) creates(ctx context.Context) (*createResult, error) {
	res := &createResult{perNode: b.o.creates, baseBin: b.o.base}
	run := func(c *job.Cluster, times *[]time.Duration, r int) error {
		ds := fmt.Sprintf("create.%d", r)
		if err := os.Mkdir(filepath.Join(c.Nodes[0].Mount, ds), 0o755); err != nil {
			return err
		}
		took, err := timeAll(len(c.Nodes), func(i int) error {
			dir := filepath.Join(c.Nodes[i].Mount, ds)
			for k := range b.o.creates {
				p := filepath.Join(dir, fmt.Sprintf("rank_%d.%05d", i, k))
				if err := os.WriteFile(p, b.buf[:b.o.fileSize], 0o644); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if r > 0 {
			*times = append(*times, took)
		}
		b.progress("create %-8s %s: %d nodes × %d files in %s", roundName(r), c.Bin(), len(c.Nodes), b.o.creates, fmtSec(took))
		if err := os.WriteFile(filepath.Join(c.Nodes[0].Mount, ds, "COMPLETE"), nil, 0o644); err != nil {
			return err
		}
		return settled(ctx, c, ds)
	}
	return res, b.withJob(ctx, "create", b.o.nodes, min(b.o.nodes, 8), func(this *job.Cluster) error {
		if b.o.base == "" {
			for r := 0; r <= b.o.rounds; r++ {
				if err := run(this, &res.this, r); err != nil {
					return err
				}
			}
			return nil
		}
		return b.withJobOf(ctx, b.o.base, "create-base", b.o.nodes, min(b.o.nodes, 8), func(base *job.Cluster) error {
			for r := 0; r <= b.o.rounds; r++ {
				first, second := this, base
				ft, st := &res.this, &res.base
				if r%2 == 1 {
					first, second, ft, st = base, this, &res.base, &res.this
				}
				if err := run(first, ft, r); err != nil {
					return err
				}
				if err := run(second, st, r); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// reportCreates writes the create measurement.
func reportCreates(w io.Writer, o options, r *createResult) {
	fmt.Fprintf(w, "\ncreates of a one-file-per-rank checkpoint: %d nodes, each %d files of %s one after another, all nodes at once (the slowest node's time)\n",
		o.nodes, r.perNode, job.FormatBytes(o.fileSize))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	rate := func(v []time.Duration) string {
		return fmt.Sprintf("%.0f files/s per node", float64(r.perNode)/job.Median(v).Seconds())
	}
	fmt.Fprintf(tw, "this build\t%s\t%s\n", job.FormatSpread(r.this), rate(r.this))
	if len(r.base) > 0 {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.baseBin, job.FormatSpread(r.base), rate(r.base))
	}
	tw.Flush()
	if len(r.base) > 0 {
		// Rates: the base's time ÷ this build's.
		fmt.Fprintf(w, "create rate, this build ÷ the base: %s\n", fmtRatio(r.base, r.this, targetCreate, true))
	}
}
