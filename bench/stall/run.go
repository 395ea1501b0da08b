package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// jobID names the benchmark's job; it is part of the cache paths.
const jobID = "stall"

// sample is one checkpoint written through the mounts or directly.
type sample struct {
	stall     time.Duration // first open → last close (or the marker's rename)
	complete  time.Duration // first open → the last node's "dataset complete" (mount only)
	protected time.Duration // earliest "dataset complete" → latest "dataset protected" (mount only)
	reported  int64         // KiB the guest handed back to the host meanwhile (free page reporting)
	others    time.Duration // CPU time of other processes meanwhile (neither this one nor the daemons)
	writers   time.Duration // CPU time of this process (the ranks) during the stall
	daemons   time.Duration // CPU time of the daemons during the stall
}

// series are the measured rounds of one workload on one scheme.
type series struct {
	direct, mount []sample
	redone        int // pairs measured again because other processes were busy
}

// bench holds what every measurement of one run shares.
type bench struct {
	o      options
	bin    string
	work   string
	port   int
	w      *writer
	status io.Writer
	echo   io.Writer
	seq    int // datasets written so far, for unique names
}

func (b *bench) progress(format string, args ...any) { fmt.Fprintf(b.status, format+"\n", args...) }

// runScheme starts a job of daemons with scheme sch and measures every
// workload, -rounds times after a warm-up, alternating which of direct and
// mount goes first so neither always follows the other's frees.
func (b *bench) runScheme(ctx context.Context, sch string) (map[string]*series, error) {
	dir := filepath.Join(b.work, sch)
	defer os.RemoveAll(dir) // /dev/shm is RAM
	c, err := job.New(job.Spec{Bin: b.bin, Dir: dir, Nodes: b.o.nodes, Port: b.port, JobID: jobID, Echo: b.echo,
		Settings: append([]string{
			"SCRFS_REDUNDANCY_SCHEME=" + sch,
			"SCRFS_REDUNDANCY_SET_SIZE=" + strconv.Itoa(max(2, b.o.nodes)),
			"SCRFS_REDUNDANCY_PARITY=" + strconv.Itoa(min(2, max(1, b.o.nodes-1))),
			// Only the application's markers complete a dataset, and only
			// the newest stays in cache: the previous one is evicted as the
			// next completes, as a real job with cache_size = 1.
			"SCRFS_DATASETS_COMPLETE=marker:COMPLETE,marker:.metadata",
			"SCRFS_DATASETS_CACHE_SIZE=1",
			"SCRFS_FLUSH_EVERY=0",
		}, b.o.settings...)})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	var mounts, directs []string
	for _, n := range c.Nodes {
		mounts = append(mounts, n.Mount)
		d := filepath.Join(dir, fmt.Sprintf("node%d", n.Index), "direct")
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		directs = append(directs, d)
	}
	out := map[string]*series{}
	t := &targets{c: c, scheme: sch, mounts: mounts, directs: directs, settle: filepath.Join(dir, "settle")}
	for r := 0; r <= b.o.rounds; r++ {
		for _, name := range b.o.workloads {
			if out[name] == nil {
				out[name] = &series{}
			}
			s := out[name]
			for attempt := 0; ; attempt++ {
				pair, err := b.pair(ctx, t, workloads[name], r)
				if err != nil {
					return out, fmt.Errorf("%s %s round %d: %w", sch, name, r, err)
				}
				if r == 0 {
					break // warm-up
				}
				if busy := slices.IndexFunc(pair[:], b.disturbed); busy >= 0 && attempt < b.o.retries {
					b.progress("%-7s %-5s round %d measured again: other processes used %s of CPU during a %s stall",
						sch, name, r, fmtDur(pair[busy].others), fmtDur(pair[busy].stall))
					s.redone++
					continue
				}
				s.direct, s.mount = append(s.direct, pair[0]), append(s.mount, pair[1])
				break
			}
		}
	}
	return out, nil
}

// targets are what one scheme's measurements write to and wait on.
type targets struct {
	c               *job.Cluster
	scheme          string
	mounts, directs []string
	settle          string // scratch directory for settle
	lastDirect      string // the direct dataset kept, as the cache keeps its newest
}

// disturbed reports a measurement during which other processes on the
// machine used more CPU than maxOthers of its stall.
func (b *bench) disturbed(s sample) bool {
	return s.others > max(time.Duration(maxOthers*float64(s.stall)), othersFloor)
}

// maxOthers is how much CPU other processes may use during a measurement,
// as a share of its stall (10% of one core, 5% of a 2-core machine); a
// measurement beyond it is redone, up to -retries times. othersFloor
// allows for the accounting's resolution: /proc counts CPU time in 10 ms
// ticks per process, and the daemons' and the benchmark's are subtracted.
const (
	maxOthers   = 0.10
	othersFloor = 60 * time.Millisecond
)

// pair measures workload wl once directly and once through the mounts, in
// the order round r gives (alternating, so neither always follows the
// other), and returns {direct, mount}.
func (b *bench) pair(ctx context.Context, t *targets, wl workload, r int) ([2]sample, error) {
	var out [2]sample
	order := []int{0, 1}
	if r%2 == 1 {
		order = []int{1, 0}
	}
	for _, i := range order {
		b.seq++
		ds := fmt.Sprintf("%s.%d", wl.name, b.seq)
		if b.o.settle {
			if err := b.w.settle(t.settle, wl, b.o.nodes*b.o.ranks); err != nil {
				return out, err
			}
		}
		var err error
		if i == 1 {
			out[i], err = b.viaMount(ctx, t, wl, ds)
		} else {
			out[i], err = b.direct(t, wl, ds)
		}
		if err != nil {
			return out, err
		}
		tag, what := "warm-up", [2]string{"direct", "mount "}[i]
		if r > 0 {
			tag = fmt.Sprintf("round %d", r)
		}
		smp := out[i]
		b.progress("%-7s %-5s %-8s %s stall %s  complete %s  protected %s  (ranks' CPU %s, daemons' %s; host took back %d MiB; other processes' CPU %s)",
			t.scheme, wl.name, tag, what, fmtDur(smp.stall), fmtDur(smp.complete),
			fmtDur(smp.protected), fmtDur(smp.writers), fmtDur(smp.daemons), smp.reported>>10, fmtDur(smp.others))
	}
	return out, nil
}

// timed writes checkpoint ds of wl into roots and returns its stall, with
// what other processes and the host took meanwhile.
func (b *bench) timed(t *targets, wl workload, roots []string, ds string) (sample, time.Time, error) {
	cpu0, err := cpuNow(t.c)
	if err != nil {
		return sample{}, time.Time{}, err
	}
	rep0 := job.ReportedKiB()
	start := time.Now()
	stall, err := b.w.checkpoint(wl, roots, b.o.ranks, ds)
	if err != nil {
		return sample{}, start, err
	}
	cpu1, err := cpuNow(t.c)
	return sample{stall: stall, reported: job.ReportedKiB() - rep0,
		others: cpu1.others - cpu0.others, writers: cpu1.self - cpu0.self, daemons: cpu1.daemons - cpu0.daemons}, start, err
}

// viaMount writes dataset ds through the mounts and waits until every node
// logged it complete and protected; then until the dataset it evicted is
// deleted, so nothing of it runs into the next measurement.
func (b *bench) viaMount(ctx context.Context, t *targets, wl workload, ds string) (sample, error) {
	smp, start, err := b.timed(t, wl, t.mounts, ds)
	if err != nil {
		return sample{}, err
	}
	c := t.c
	timeout := time.Minute + time.Duration(b.o.size*int64(b.o.ranks*b.o.nodes)/(20<<20))*time.Second
	comp, err := c.WaitAll(ctx, timeout, job.IsEvent("dataset complete", ds), job.OutcomeOf(ds))
	if err != nil {
		return sample{}, fmt.Errorf("%s not complete: %w", ds, err)
	}
	first, lastComp := comp[0].Time, comp[0].Time
	for _, e := range comp {
		first, lastComp = minTime(first, e.Time), maxTime(lastComp, e.Time)
	}
	smp.complete = lastComp.Sub(start)
	if t.scheme == "single" {
		// SINGLE logs no "dataset protected": it only records the files'
		// metadata in a redundancy file, which still reads every file, so
		// the next measurement waits for that file on every node.
		if err := awaitRecords(ctx, c, ds); err != nil {
			return sample{}, err
		}
	} else {
		prot, err := c.WaitAll(ctx, timeout, job.IsEvent("dataset protected", ds), job.OutcomeOf(ds))
		if err != nil {
			return sample{}, fmt.Errorf("%s not protected: %w", ds, err)
		}
		lastProt := prot[0].Time
		for _, e := range prot {
			lastProt = maxTime(lastProt, e.Time)
		}
		smp.protected = lastProt.Sub(first)
	}
	return smp, c.AwaitDeleted(ctx, jobID)
}

// direct writes dataset ds into the nodes' direct directories (on the same
// device as the caches) and then deletes the one written before, as the
// cache evicts the previous dataset when the next completes.
func (b *bench) direct(t *targets, wl workload, ds string) (sample, error) {
	smp, _, err := b.timed(t, wl, t.directs, ds)
	if err != nil {
		return sample{}, err
	}
	if prev := t.lastDirect; prev != "" {
		for _, r := range t.directs {
			if err := os.RemoveAll(filepath.Join(r, prev)); err != nil {
				return sample{}, err
			}
		}
	}
	t.lastDirect = ds
	return smp, nil
}

// awaitRecords waits until every node's cache holds a redundancy file of
// dataset ds: SINGLE's record of the dataset's files, written after
// completion.
func awaitRecords(ctx context.Context, c *job.Cluster, ds string) error {
	for _, n := range c.Nodes {
		meta := filepath.Join(n.CacheDir(jobID), ds, ".scrfs")
		err := job.Poll(ctx, func() (bool, error) {
			m, err := filepath.Glob(filepath.Join(meta, "*.redset"))
			return len(m) > 0, err
		})
		if err != nil {
			return fmt.Errorf("node %d: no redundancy file in %s: %w", n.Index, meta, err)
		}
	}
	return nil
}

// cpuTimes are the CPU times used so far by this process (the ranks), by
// the job's daemons and by every other process on the machine, from /proc:
// what the mount costs the ranks, what the daemons did meanwhile, and what
// other work on the machine took.
type cpuTimes struct{ self, daemons, others time.Duration }

func cpuNow(c *job.Cluster) (cpuTimes, error) {
	busy, err := job.BusyCPU()
	if err != nil {
		return cpuTimes{}, err
	}
	self, err := job.ProcessUsage("self")
	if err != nil {
		return cpuTimes{}, err
	}
	daemons, err := c.Usage()
	if err != nil {
		return cpuTimes{}, err
	}
	return cpuTimes{self.CPU, daemons.CPU, busy - self.CPU - daemons.CPU}, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "   -   "
	}
	return fmt.Sprintf("%6.3fs", d.Seconds())
}
