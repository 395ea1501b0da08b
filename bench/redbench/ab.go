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
	"github.com/scrfs/scrfs/internal/loopback"
)

// The A/B mode (-ab): two builds (or two settings) compared on a machine
// whose load others vary. For each scheme a job of daemons runs for A
// (-bin, -set) and one for B (-ab, -set and -ab-set), side by side on
// their own ports and directories, and they take turns round by round —
// the order alternating, so neither always runs right after the other — so
// both see the same background load. Each round's B ÷ A is kept as a pair:
// the median of those ratios is what a change did, with far less noise than
// two separate runs give.

// abSide is one of the two jobs of an A/B comparison.
type abSide struct {
	label    string
	c        *job.Cluster
	mounts   []string
	rounds   []round
	rebuilds map[int]*rebuildResult // by nodes lost
}

// runAB compares A and B for every scheme at -size and prints the result.
func runAB(ctx context.Context, b *bench, schemes []scheme, stdout io.Writer) error {
	var failed []string
	var results [][2]*abSide
	for _, sch := range schemes {
		sides, err := b.abScheme(ctx, sch, b.o.size)
		results = append(results, sides)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", sch, err))
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
	reportAB(stdout, b.o, b.bin, schemes, results)
	if len(failed) > 0 {
		return fmt.Errorf("%d comparison(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}

// abScheme runs scheme sch with checkpoints of size bytes per node on both
// sides: a warm-up each, -rounds encode rounds in turns, then with -rebuild
// the rebuilds in turns.
func (b *bench) abScheme(ctx context.Context, sch scheme, size int64) ([2]*abSide, error) {
	bins := [2]string{b.bin, b.o.ab}
	extra := [2][]string{nil, b.o.abSettings}
	var sides [2]*abSide
	port := b.port
	for i, label := range []string{"A", "B"} {
		if i == 1 {
			var err error
			if port, err = loopback.FreePort(b.o.nodes); err != nil {
				return sides, err
			}
		}
		dir := filepath.Join(b.work, fmt.Sprintf("%s-%d-%s", sch.kind, size, label))
		c, err := newCluster(bins[i], dir, b.o.nodes, port, sch, append(slices.Clone(b.o.settings), extra[i]...), b.echo)
		if err != nil {
			return sides, err
		}
		defer func() {
			c.Stop()
			os.RemoveAll(dir)
		}()
		// Start each before picking the next port, so B's is not A's.
		if err := c.Start(ctx); err != nil {
			return sides, fmt.Errorf("%s: %w", label, err)
		}
		sd := &abSide{label: label, c: c, rebuilds: map[int]*rebuildResult{}}
		for _, n := range c.Nodes {
			sd.mounts = append(sd.mounts, n.Mount)
		}
		sides[i] = sd
	}
	// order returns the sides in round r's order: A first in odd rounds.
	order := func(r int) []*abSide {
		if r%2 == 1 {
			return []*abSide{sides[0], sides[1]}
		}
		return []*abSide{sides[1], sides[0]}
	}
	for r := 0; r <= b.o.rounds; r++ {
		for _, sd := range order(r) {
			rd, err := b.encodeRound(ctx, sd.c, sd.mounts, sch, size, r, sd.label)
			if err != nil {
				return sides, fmt.Errorf("%s: %w", sd.label, err)
			}
			if r > 0 {
				sd.rounds = append(sd.rounds, rd)
			}
		}
	}
	if !b.o.rebuild {
		return sides, nil
	}
	last := fmt.Sprintf("ckpt.%d", b.o.rounds)
	for _, lost := range sch.losses() {
		for r := range b.o.rounds {
			for _, sd := range order(r + 1) {
				rr := sd.rebuilds[lost]
				if rr == nil {
					rr = &rebuildResult{lost: lost}
					sd.rebuilds[lost] = rr
				}
				if err := b.rebuildRound(ctx, sd.c, sch, last, size, lost, r, rr, sd.label); err != nil {
					rr.err = err
					return sides, fmt.Errorf("%s: %w", sd.label, err)
				}
			}
		}
	}
	return sides, nil
}

// reportAB prints, per scheme, A's and B's medians [min–max] and the
// median of the per-round ratios B ÷ A.
func reportAB(w io.Writer, o options, binA string, schemes []scheme, results [][2]*abSide) {
	fmt.Fprintf(w, "\nA/B at B=%s per node, %d daemons, caches in %s: A = %s%s, B = %s%s\n"+
		"the two jobs run side by side and take turns round by round (the order alternating); median [min–max] of %d rounds\n"+
		"after a warm-up each, and the median of the %d per-round ratios B ÷ A (rebuilds: per rebuild round)\n",
		job.FormatBytes(o.size), o.nodes, o.dir, binA, fmtSettings(o.settings), o.ab, fmtSettings(append(slices.Clone(o.settings), o.abSettings...)),
		o.rounds, o.rounds)
	gib := float64(o.size) * float64(o.nodes) / (1 << 30)
	tw := newTable(w)
	fmt.Fprintln(tw, "scheme\tmeasure\tA\tB\tB ÷ A (paired median)\t")
	for i, sch := range schemes {
		a, b := results[i][0], results[i][1]
		if a == nil || b == nil || len(a.rounds) == 0 || len(a.rounds) != len(b.rounds) {
			fmt.Fprintf(tw, "%s\tfailed\t\t\t\t\n", sch)
			continue
		}
		row := func(what string, f func(rd round) float64, unit string) {
			var va, vb, ratio []float64
			for j := range a.rounds {
				x, y := f(a.rounds[j]), f(b.rounds[j])
				va, vb, ratio = append(va, x), append(vb, y), append(ratio, y/x)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3f\t\n", sch, what, fmtFloats(va, unit), fmtFloats(vb, unit), median(ratio))
		}
		row("time to protected", func(rd round) float64 { return rd.ttp.Seconds() }, "s")
		row("daemons' CPU per GiB", func(rd round) float64 { return rd.used.CPU.Seconds() / gib }, "s/GiB")
		for _, lost := range sch.losses() {
			ra, rb := a.rebuilds[lost], b.rebuilds[lost]
			if ra == nil || rb == nil || len(ra.spans) == 0 || len(ra.spans) != len(rb.spans) {
				continue
			}
			var va, vb, ratio []float64
			for j := range ra.spans {
				va, vb = append(va, ra.spans[j].Seconds()), append(vb, rb.spans[j].Seconds())
				ratio = append(ratio, vb[j]/va[j])
			}
			fmt.Fprintf(tw, "%s\trebuild of %d\t%s\t%s\t%.3f\t\n", sch, lost, fmtFloats(va, "s"), fmtFloats(vb, "s"), median(ratio))
			encA := job.Median(durations(a.rounds, func(rd round) time.Duration { return rd.ttp }))
			encB := job.Median(durations(b.rounds, func(rd round) time.Duration { return rd.ttp }))
			fmt.Fprintf(tw, "%s\trebuild of %d ÷ encode\t%.2f\t%.2f\t\t\n", sch, lost, median(va)/encA.Seconds(), median(vb)/encB.Seconds())
		}
	}
	tw.Flush()
}

func durations(rds []round, f func(round) time.Duration) []time.Duration {
	var out []time.Duration
	for _, rd := range rds {
		out = append(out, f(rd))
	}
	return out
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtFloats(v []float64, unit string) string {
	return fmt.Sprintf("%.2f %s [%.2f–%.2f]", median(v), unit, slices.Min(v), slices.Max(v))
}

func fmtSettings(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return " (" + strings.Join(s, " ") + ")"
}
