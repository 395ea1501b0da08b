package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// chaosDataset is what the test knows of one checkpoint: what it wrote,
// and what the daemons reported of it.
type chaosDataset struct {
	name string
	// files is the job's view of it as written: path → sha256. Every
	// node's mount shows it whole once complete.
	files map[string]string
	// marked: its completion marker was written, so it may have completed
	// on some node (and made an older dataset go by the cache size).
	marked bool
	// partial: a node was killed after it began and before it completed;
	// it must never be recorded, protected, flushed or listed complete.
	partial bool
	// disturbed: a node was killed before it settled, so it may fail at
	// completion (the killed node's share cannot be proven).
	disturbed bool
	settled   bool
	// What some node reported: a record (seq), protected, flushed.
	recorded, protected, flushed, flushFailed bool
	// recordedOn are the nodes that reported its record and were not
	// wiped since: while there is one, the record is not lost (node 0
	// keeps it first, and a node 0 wiped then takes it along).
	recordedOn map[int]bool
	// lost are the nodes whose share was wiped and not rebuilt since.
	lost map[int]bool
	// failed is its reason once it failed and the reason was judged true.
	failed  string
	evicted bool
	// members are the nodes of the job that wrote it, tolerance the
	// members its scheme (the job's for that many nodes) can lose.
	members   []int
	tolerance int
	// recordRefused: a member's cache was full when it completed, so the
	// record could not be kept there.
	recordRefused bool
	// keptAway: it failed while members were away, so its files are kept
	// where they are (keptCounted once found so); spaced: a cache holding
	// it filled up since, and may have evicted it for the space.
	keptAway, keptCounted, spaced bool
	// single: recorded by a job of one node, under SINGLE.
	single bool
}

// chaosFile is one file a node writes, generated before the writes start
// (the PRNG is the test goroutine's).
type chaosFile struct {
	path string // inside the dataset
	data []byte
	// shared: data is this node's part, at off, of a file every node
	// writes a part of (MPI-IO's one shared file).
	shared bool
	off    int64
}

// sharedName is the file every node writes a part of in every checkpoint,
// and sharedSlot how far apart the nodes' parts start.
const (
	sharedName = "shared.bin"
	sharedSlot = 256 << 10
)

// begin names the next checkpoint.
func (ch *chaos) begin() *chaosDataset {
	ch.counts.datasets++
	_, tol := ch.sc.sized(len(ch.job))
	ds := &chaosDataset{name: fmt.Sprintf("ckpt.%d", ch.counts.datasets), files: map[string]string{}, lost: map[int]bool{}, recordedOn: map[int]bool{},
		members: slices.Clone(ch.job), tolerance: tol, single: len(ch.job) == 1}
	ch.datasets = append(ch.datasets, ds)
	return ds
}

// plan generates the files of ds of every node of the job, in the job's
// order: 0 to 3 each, mostly small, now and then a few MiB (so an encode,
// flush or rebuild lasts long enough to be hit), some in a subdirectory
// named after the node; and each node's part of sharedName.
func (ch *chaos) plan(ds *chaosDataset) [][]chaosFile {
	out := make([][]chaosFile, len(ch.job))
	for k := range out {
		i := ch.job[k]
		out[k] = append(out[k], chaosFile{path: sharedName, data: ch.random(1 + ch.rng.IntN(sharedSlot-1)),
			shared: true, off: int64(i) * sharedSlot})
		for j := range ch.rng.IntN(4) {
			var size int
			switch r := ch.rng.IntN(100); {
			case r < 65:
				size = ch.rng.IntN(64 << 10)
			case r < 93:
				size = 64<<10 + ch.rng.IntN(448<<10)
			default:
				size = 1<<20 + ch.rng.IntN(3<<20)
			}
			dir := fmt.Sprintf("r%d", i)
			if ch.rng.IntN(3) == 0 {
				dir = filepath.Join(dir, "sub")
			}
			out[k] = append(out[k], chaosFile{path: filepath.Join(dir, fmt.Sprintf("f%d.bin", j)), data: ch.random(size)})
		}
	}
	return out
}

// random returns size bytes drawn from the test's PRNG.
func (ch *chaos) random(size int) []byte {
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(ch.rng.Uint64(), ch.rng.Uint64()))
	for k := 0; k < size; k += 8 {
		v := r.Uint64()
		for b := 0; b < 8 && k+b < size; b++ {
			data[k+b] = byte(v >> (8 * b))
		}
	}
	return data
}

// writeFile writes f at p as its node does: a file of its own whole, a
// part of the shared file at its offset (created by whichever node comes
// first, opened by the others).
func writeFile(p string, f chaosFile) error {
	if !f.shared {
		return os.WriteFile(p, f.data, 0o644)
	}
	fd, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fd.WriteAt(f.data, f.off)
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeResult is one node's writes of a dataset.
type writeResult struct {
	node  int
	wrote []chaosFile // the files written whole
	err   error
}

// startWrites writes every node's files (files[k] are node ch.job[k]'s)
// through its own mount, the nodes at once, each its files in turn (as
// ranks do, making the dataset directory if missing); begun is set once
// the dataset exists on some node. The results arrive on the returned
// channel, one per node.
func (ch *chaos) startWrites(ds *chaosDataset, files [][]chaosFile, begun *atomic.Bool) <-chan writeResult {
	done := make(chan writeResult, len(files))
	for k, fs := range files {
		i := ch.job[k]
		n := ch.c.Nodes[i]
		go func() {
			res := writeResult{node: i}
			defer func() { done <- res }()
			if err := os.MkdirAll(n.Path(ds.name), 0o755); err != nil {
				res.err = err
				return
			}
			begun.Store(true)
			for _, f := range fs {
				p := n.Path(ds.name, f.path)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					res.err = err
					return
				}
				if err := writeFile(p, f); err != nil {
					res.err = err
					return
				}
				res.wrote = append(res.wrote, f)
			}
		}()
	}
	return done
}

// collect waits for every node's writes, bounded, and adds what was
// written whole to the dataset's expected files.
func (ch *chaos) collect(ds *chaosDataset, done <-chan writeResult, nodes int) []writeResult {
	var out []writeResult
	var shared []byte // the parts of sharedName written, where each was
	timeout := time.After(chaosOp)
	for range nodes {
		select {
		case r := <-done:
			out = append(out, r)
			for _, f := range r.wrote {
				if f.shared {
					end := int(f.off) + len(f.data)
					shared = append(shared, make([]byte, max(0, end-len(shared)))...)
					copy(shared[f.off:], f.data)
					continue
				}
				sum := sha256.Sum256(f.data)
				ds.files[f.path] = hex.EncodeToString(sum[:])
			}
		case <-timeout:
			ch.t.Fatalf("HANG: writes of %s through the mounts not done within %v", ds.name, chaosOp)
		}
	}
	if shared != nil {
		sum := sha256.Sum256(shared)
		ds.files[sharedName] = hex.EncodeToString(sum[:])
	}
	return out
}

// write writes ds on every node; every write must succeed.
func (ch *chaos) write(ds *chaosDataset) {
	var begun atomic.Bool
	files := ch.plan(ds)
	for _, r := range ch.collect(ds, ch.startWrites(ds, files, &begun), len(files)) {
		if r.err != nil {
			ch.t.Fatalf("node %d: writing %s with every node up: %v", r.node, ds.name, r.err)
		}
	}
}

// writeAndKill writes ds and kills nodes at a random moment while it is
// written. Once the dataset has begun, the kill makes it partial: it must
// fail. Killed before it began, the dead nodes wrote nothing, which the
// job may accept (it knows their daemons began none of it). Writes on the
// killed nodes fail; on live ones they may be refused as the job fails
// the dataset, but never hang.
func (ch *chaos) writeAndKill(ds *chaosDataset) ([]int, string) {
	var begun atomic.Bool
	files := ch.plan(ds)
	victims := ch.pickVictims(ch.sc.victims, nil)
	done := ch.startWrites(ds, files, &begun)
	time.Sleep(time.Duration(ch.rng.IntN(150)) * time.Millisecond) // the random moment itself
	ds.partial = begun.Load()
	ch.kill(victims, phaseWrite)
	ch.disturb()
	if ds.partial {
		ch.counts.partial++
	}
	for _, r := range ch.collect(ds, done, len(files)) {
		if r.err != nil && !slices.Contains(victims, r.node) {
			ch.counts.writeErrors++
			ch.t.Logf("%s: node %d's writes of %s with nodes %v killed: %v; its log ends:\n%s", ch.sc.name, r.node, ds.name, victims, r.err,
				strings.Join(ch.c.Nodes[r.node].log.tail(15), "\n"))
		}
	}
	return victims, phaseWrite
}

// disturb notes a kill: every dataset not settled yet may fail at
// completion because of it.
func (ch *chaos) disturb() {
	for _, ds := range ch.datasets {
		if !ds.settled {
			ds.disturbed = true
		}
	}
}

// mark writes the completion marker on a live node. A partial dataset may
// be gone already (failed), and then the marker cannot be created: a
// dataset that failed is never begun again by its marker.
func (ch *chaos) mark(ds *chaosDataset) {
	var live []int
	for _, i := range ch.job {
		if !ch.c.Nodes[i].hasExited() {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return // every node of the job is down: it is marked once they are back
	}
	i := live[ch.rng.IntN(len(live))]
	err := within(chaosOp, func() error { return os.WriteFile(ch.c.Nodes[i].Path(ds.name, "COMPLETE"), nil, 0o644) })
	switch {
	case errors.Is(err, errHang):
		ch.t.Fatalf("HANG: marker of %s on node %d: %v", ds.name, i, err)
	case err != nil && ds.partial:
		ch.t.Logf("%s: marker of the interrupted %s on node %d: %v", ch.sc.name, ds.name, i, err)
		return
	case err != nil && ds.disturbed:
		// Killed before it began: the job may have failed it already, or
		// the marker's name is kept by a killed node, which cannot speak
		// for the dataset's names (EIO): either way it cannot complete.
		ch.t.Logf("%s: marker of %s on node %d: %v", ch.sc.name, ds.name, i, err)
		return
	case err != nil:
		ch.t.Fatalf("marker of %s on node %d: %v", ds.name, i, err)
	}
	ds.marked = true
	sum := sha256.Sum256(nil)
	ds.files["COMPLETE"] = hex.EncodeToString(sum[:])
}

// errHang is what within returns for a call that did not end in time.
var errHang = errors.New("no answer in time")

// within runs f, bounded by d: a call that hangs (in a FUSE request, say)
// is left behind and reported as errHang; the test fails then, and the
// daemons' cleanup ends the call.
func within(d time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("%w (%v)", errHang, d)
	}
}
