package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/scrfs/scrfs/internal/testutil"
)

// Issue 26's chaos: restarts of the whole job on another node set, and
// caches that fill up.

// The node-set changes, as the report counts them.
const (
	setFewer  = "fewer nodes within tolerance"
	setBeyond = "fewer nodes beyond tolerance"
	setOrder  = "another order"
	setBack   = "back on the full node list"
)

// chaosCacheBytes is each node's cache file system: room for the cache
// size's checkpoints, their redundancy, what the job keeps and reads, and
// little more, so that a checkpoint can fill it.
const chaosCacheBytes = "160m"

// mountSmall mounts a tmpfs of size at dir for the test's life, and
// reports whether it could.
func mountSmall(t *testing.T, dir, size string) bool {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Logf("cannot mount a tmpfs at %s: %v", dir, err)
		return false
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return true
}

// changeNodes restarts the whole job on another node set: on fewer nodes
// (within the tolerance of its schemes, or beyond it), in another order,
// or back on its full node list, the returning nodes with their caches.
// The nodes are stopped as a job ends, or killed as it crashes.
func (ch *chaos) changeNodes() {
	all := len(ch.c.Nodes)
	full := len(ch.job) == all
	var kind string
	var keep int
	switch r := ch.rng.IntN(100); {
	case !full && r < 70:
		kind, keep = setBack, all
	case !full:
		kind, keep = setOrder, len(ch.job)
	case r < 35:
		kind, keep = setFewer, all-1-ch.rng.IntN(ch.sc.tolerance)
	case r < 65:
		kind, keep = setBeyond, all-ch.sc.tolerance-1
	default:
		kind, keep = setOrder, all
	}
	var order []int
	switch {
	case keep == all:
		order = ch.rng.Perm(all)
	default:
		// Drop from the nodes the job runs on now.
		perm := ch.rng.Perm(len(ch.job))
		for _, j := range perm[:keep] {
			order = append(order, ch.job[j])
		}
	}
	crash := ch.rng.IntN(2) == 0
	for _, i := range ch.job {
		if crash {
			ch.c.Nodes[i].Kill()
		} else if err := ch.c.Nodes[i].Stop(); err != nil {
			ch.t.Logf("%s: node %d stopped: %v", ch.sc.name, i, err)
		}
	}
	job := ch.c.jobOn(order)
	env, _ := ch.sc.sized(len(order))
	for _, n := range job.Nodes {
		n.Job = append(n.Job, env...)
	}
	ch.job = order
	ch.counts.nodeSets[kind]++
	ch.restartedAll = true
	ch.disturb()
	ch.t.Logf("%s: the job restarts on nodes %v (%s; crashed: %v)", ch.sc.name, order, kind, crash)
	for _, i := range order {
		ch.c.Nodes[i].StartNoWait()
		ch.counts.restarts++
	}
	for _, i := range order {
		ch.waitReady(i)
	}
}

// inJob says whether node i runs in the job now.
func (ch *chaos) inJob(i int) bool { return slices.Contains(ch.job, i) }

// away returns the members of ds whose nodes are not in the job now.
func (ch *chaos) away(ds *chaosDataset) []int {
	var out []int
	for _, m := range ds.members {
		if !ch.inJob(m) {
			out = append(out, m)
		}
	}
	return out
}

// fillCache fills node i's cache file system with a file of the test's,
// beside the job's directory, and returns a function that removes it.
func (ch *chaos) fillCache(i int) (free func()) {
	p := filepath.Join(ch.c.Nodes[i].Cache, fmt.Sprintf("ballast.%d", ch.rng.Uint64()))
	fill(ch.t, p)
	return func() { must(ch.t, os.Remove(p)) }
}

// writeFull writes ds while node v's cache is full, as another job on the
// node might fill it. The writers there get ENOSPC: each removes the file
// it could not write, as an application cleaning up after an error would,
// and goes on. Then either space is freed before the marker (the
// checkpoint completes with the files written whole), or the cache is
// still full (it is filled again, the removed files having freed some):
// the record cannot be kept there, and the checkpoint must fail on every
// node, never be complete or flushed anywhere.
func (ch *chaos) writeFull(ds *chaosDataset) {
	v := ch.job[ch.rng.IntN(len(ch.job))]
	ch.counts.fullCaches++
	free := ch.fillCache(v)
	// Failed datasets kept on v may go for the space it lacks now.
	for _, d := range ch.datasets {
		if slices.Contains(d.members, v) {
			d.spaced = true
		}
	}
	var begun atomic.Bool
	// Each node's own files only: a rank that removes its part of the
	// shared file after ENOSPC would remove the job's one file under the
	// others still writing it, which no MPI-IO application does.
	files := ch.plan(ds)
	for k := range files {
		files[k] = slices.DeleteFunc(files[k], func(f chaosFile) bool { return f.shared })
	}
	for _, r := range ch.collect(ds, ch.startWrites(ds, files, &begun), len(files)) {
		switch {
		case r.err == nil:
		case r.node == v && errors.Is(r.err, syscall.ENOSPC):
			ch.counts.enospc++
			failed := files[slices.Index(ch.job, v)][len(r.wrote)]
			if err := os.Remove(ch.c.Nodes[v].Path(ds.name, failed.path)); err != nil && !errors.Is(err, os.ErrNotExist) {
				ch.t.Fatalf("node %d: removing %s of %s after ENOSPC: %v", v, failed.path, ds.name, err)
			}
		default:
			ch.t.Fatalf("node %d: writing %s with every node up, node %d's cache full: %v", r.node, ds.name, v, r.err)
		}
	}
	full := ch.rng.IntN(2) == 0
	if full {
		free2 := ch.fillCache(v)
		defer free2()
		ds.recordRefused = true
	} else {
		free()
		free = func() {}
	}
	ch.t.Logf("%s %s: node %d's cache full while written, still full at the marker: %v", ch.sc.name, ds.name, v, full)
	ch.mark(ds)
	if full {
		// The record goes out as soon as every node completed: the dataset
		// settles before the space is freed — it fails, or, when the
		// record fitted and its redundancy did not, waits degraded for
		// the space (the job takes stock again after the test frees it).
		ch.fullNow = true
		ch.settle()
		ch.fullNow = false
		ds.settled = false
	}
	free()
}

// checkKept checks that the nodes of the job that held a share of ds,
// failed for members away, keep its files: nothing is deleted on a guess.
func (ch *chaos) checkKept(ds *chaosDataset) {
	if ds.spaced || ch.evictable(ds) {
		return
	}
	for _, m := range ds.members {
		if !ch.inJob(m) || ds.lost[m] {
			continue
		}
		if _, err := os.Stat(ch.c.Nodes[m].CacheDir(ds.name)); err != nil {
			ch.t.Fatalf("%s failed for members away (%s), but node %d, which held a share of it, did not keep it: %v",
				ds.name, ds.failed, m, err)
		}
	}
	if !ds.keptCounted {
		ds.keptCounted = true
		ch.counts.kept++
	}
}

// returned says whether ds, failed for members away and kept, must be
// served again now: every member is back, no more of them lost than its
// scheme tolerates, and neither the cache size nor the space took it.
func (ch *chaos) returned(ds *chaosDataset) bool {
	return ds.keptAway && len(ch.away(ds)) == 0 && len(ds.lost) <= ds.tolerance && !ds.spaced && !ch.evictable(ds)
}

// checkSameView checks that every mount of the job shows the same
// datasets, once each node's eviction (which follows the newest dataset's
// settling) had its moment.
func (ch *chaos) checkSameView() {
	var last string
	same := testutil.Poll(chaosOp, func() bool {
		var first []string
		for k, i := range ch.job {
			var names []string
			err := within(chaosOp, func() error {
				ents, err := os.ReadDir(ch.c.Nodes[i].Path())
				for _, e := range ents {
					names = append(names, e.Name())
				}
				return err
			})
			if errors.Is(err, errHang) {
				ch.t.Fatalf("HANG: listing node %d's mount: %v", i, err)
			}
			if err != nil {
				ch.t.Fatalf("listing node %d's mount: %v", i, err)
			}
			if k == 0 {
				first = names
				continue
			}
			if !slices.Equal(names, first) {
				last = fmt.Sprintf("node %d's mount shows %v, node %d's %v", i, names, ch.job[0], first)
				return false
			}
		}
		return true
	})
	if !same {
		ch.t.Fatalf("the mounts do not show the same datasets within %v: %s", testutil.Scale(chaosOp), last)
	}
	ch.counts.sameView++
}

// checkNewest checks, after the whole job restarted, that it serves the
// newest intact checkpoint: none the prefix holds complete and verified
// is newer than the newest one every node holds protected.
func (ch *chaos) checkNewest(served func(*chaosDataset) bool) {
	newestServed, newestPrefix := -1, -1
	for k, ds := range ch.datasets {
		if served(ds) {
			newestServed = k
		}
		if ch.inPrefix(ds) && !ds.partial {
			newestPrefix = k
		}
	}
	if newestPrefix > newestServed {
		served := "none"
		if newestServed >= 0 {
			served = ch.datasets[newestServed].name
		}
		ch.t.Fatalf("after a restart of the whole job it serves %s, but the prefix holds %s complete and verified, newer",
			served, ch.datasets[newestPrefix].name)
	}
	ch.counts.newest++
}
