package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/bench/internal/netbound"
	"github.com/scrfs/scrfs/internal/loopback"
)

// jobID names the benchmark's jobs; it is part of the cache paths.
const jobID = "nsbench"

// ioSize is the unit of every read and write the benchmark makes.
const ioSize = netbound.IOSize

// bench holds what every measurement of one run shares.
type bench struct {
	o      options
	bin    string // the scrfs binary
	self   string // this program, for the stream bound's node processes
	work   string // scratch directory under -dir, removed at the end
	status io.Writer
	echo   io.Writer
	buf    []byte // ioSize of payload, read-only once made
}

func (b *bench) progress(format string, args ...any) { fmt.Fprintf(b.status, format+"\n", args...) }

// results are what the run measured; a part not run stays nil.
type results struct {
	remote *remoteResult
	dcp    *dcpResult
	torch  *torchResult
	list   *listResult
	create *createResult
	scale  []*scaleResult
}

// run measures what -only asks for and prints the report to stdout;
// progress goes to stderr. A part that fails is reported and the others
// still run.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	work, err := os.MkdirTemp(o.dir, "nsbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b := &bench{o: o, work: work, status: stderr, buf: payload()}
	if o.verbose {
		b.echo = stderr
	}
	if b.self, err = os.Executable(); err != nil {
		return fmt.Errorf("find own executable for the stream bound: %w", err)
	}
	if b.bin = o.bin; b.bin == "" {
		if b.bin, err = job.Build(work); err != nil {
			return err
		}
	}
	var res results
	var failed []error
	fail := func(what string, err error) {
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", what, err))
			b.progress("%s failed: %v", what, err)
		}
	}
	if o.does("remote") || o.does("dcp") || o.does("torch") || o.does("list") {
		err := b.withJob(ctx, "main", o.nodes, min(o.nodes, 8), func(c *job.Cluster) error {
			if o.does("remote") {
				res.remote, err = b.remote(ctx, c)
				fail("remote read", err)
			}
			if o.does("dcp") && ctx.Err() == nil {
				res.dcp, err = b.dcp(ctx, c)
				fail("dcp pattern", err)
			}
			if o.does("torch") && ctx.Err() == nil {
				res.torch, err = b.torch(ctx, c)
				fail("torch", err)
			}
			if o.does("list") && ctx.Err() == nil {
				res.list, err = b.list(ctx, c)
				fail("listing", err)
			}
			return nil
		})
		fail("main job", err)
	}
	if o.does("create") && ctx.Err() == nil {
		res.create, err = b.creates(ctx)
		fail("creates", err)
	}
	if o.does("scale") {
		for _, n := range o.scale {
			if ctx.Err() != nil {
				break
			}
			var r *scaleResult
			err := b.withJob(ctx, "scale"+strconv.Itoa(n), n, min(n, 8), func(c *job.Cluster) error {
				var err error
				r, err = b.scale(ctx, c)
				return err
			})
			fail(fmt.Sprintf("scale %d", n), err)
			if r != nil {
				res.scale = append(res.scale, r)
			}
		}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	report(stdout, o, &res)
	return errors.Join(failed...)
}

// withJob starts a job of n daemons (redundancy sets of setSize) under
// its own directory, runs f and stops the job.
func (b *bench) withJob(ctx context.Context, name string, n, setSize int, f func(*job.Cluster) error) error {
	return b.withJobOf(ctx, b.bin, name, n, setSize, f)
}

// withJobOf is withJob running scrfs binary bin.
func (b *bench) withJobOf(ctx context.Context, bin, name string, n, setSize int, f func(*job.Cluster) error) error {
	port, err := loopback.FreePort(n)
	if err != nil {
		return err
	}
	dir := filepath.Join(b.work, name)
	defer os.RemoveAll(dir) // /dev/shm is RAM
	c, err := job.New(job.Spec{Bin: bin, Dir: dir, Nodes: n, Port: port, JobID: jobID, Echo: b.echo,
		Settings: append([]string{
			job.MetricsOn,
			"SCRFS_REDUNDANCY_SCHEME=" + b.o.scheme,
			"SCRFS_REDUNDANCY_SET_SIZE=" + strconv.Itoa(setSize),
			"SCRFS_REDUNDANCY_PARITY=" + strconv.Itoa(min(2, setSize-1)),
			"SCRFS_REDUNDANCY_REPLICAS=1",
			// The application's markers complete a dataset, and only the
			// newest stays in cache (with what other nodes read of it), so
			// each measurement starts with a cold read cache.
			"SCRFS_DATASETS_COMPLETE=marker:COMPLETE,marker:.metadata",
			"SCRFS_DATASETS_CACHE_SIZE=1",
			"SCRFS_FLUSH_EVERY=0",
		}, b.o.settings...)})
	if err != nil {
		return err
	}
	defer c.Stop()
	b.progress("%s: starting %d daemons", name, n)
	if err := c.Start(ctx); err != nil {
		return err
	}
	return f(c)
}

// settled waits until every node logged dataset ds protected and the
// dataset it evicted deleted: nothing of the writing runs into the
// measurement that follows.
func settled(ctx context.Context, c *job.Cluster, ds string) error {
	if _, err := c.WaitAll(ctx, 10*time.Minute, job.IsEvent("dataset protected", ds), job.OutcomeOf(ds)); err != nil {
		return fmt.Errorf("%s not protected: %w", ds, err)
	}
	return c.AwaitDeleted(ctx, jobID)
}

// payload returns ioSize bytes that are not all alike.
func payload() []byte {
	b := make([]byte, ioSize)
	for i := range b {
		b[i] = byte(i*7 + i>>11 + 1)
	}
	return b
}

// writers bounds the files write creates at once.
const writers = 16

// write creates the files of files (path → size) under root, up to writers
// at once, and then marker (if not "") once they are all closed, as an
// application's ranks and then its rank 0 after a barrier.
func (b *bench) write(root string, files map[string]int64, marker string) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, writers)
	for p, size := range files {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			path := filepath.Join(root, filepath.FromSlash(p))
			err := os.MkdirAll(filepath.Dir(path), 0o755)
			if err == nil {
				err = netbound.WriteN(path, size, b.buf, false)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil || marker == "" {
		return err
	}
	return netbound.WriteN(filepath.Join(root, marker), 64, b.buf, false)
}

// received returns what every node's daemon received of other nodes'
// files so far (scrfs_namespace_received_bytes_total), by node.
func received(ctx context.Context, c *job.Cluster) ([]int64, error) {
	out := make([]int64, len(c.Nodes))
	for i, n := range c.Nodes {
		m, err := n.Metrics(ctx)
		if err != nil {
			return nil, err
		}
		out[i] = int64(m.Sum("scrfs_namespace_received_bytes_total"))
	}
	return out, nil
}

// sum adds up v.
func sum(v []int64) int64 {
	var s int64
	for _, x := range v {
		s += x
	}
	return s
}

// timeAll runs f for each of n workers at once and returns the time from
// their common start until the last one returned.
func timeAll(n int, f func(i int) error) (time.Duration, error) {
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	return time.Since(t0), errors.Join(errs...)
}

// roundName is "warm-up" for round 0, else "round N".
func roundName(r int) string {
	if r == 0 {
		return "warm-up"
	}
	return "round " + strconv.Itoa(r)
}
