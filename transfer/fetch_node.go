package transfer

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/prefix"
)

// Every node's side of a fetch: copy this node's files of the dataset into
// the staging directory ("fetch"), then adopt them into the cache
// ("fetch-commit") or drop them ("fetch-abort") as node 0 decides.

// handleFetch copies this node's share of a dataset from the prefix into
// the staging directory, verifying sizes and CRCs.
func (f *Flusher) handleFetch(ctx context.Context, from int, m fetchMsg) (any, error) {
	if f.prefix == nil {
		return nil, errNoPrefix
	}
	man, err := f.prefix.ReadManifest(ctx, m.Dataset, m.Manifest)
	if err != nil {
		if copyFault(err) {
			err = fmt.Errorf("%w: %w", ErrBadCopy, err)
		}
		return nil, err
	}
	staging := f.o.Store.StagingDir(m.Dataset)
	if err := os.RemoveAll(staging); err != nil {
		return nil, fmt.Errorf("fetch %s: clear staging directory: %w", m.Dataset, err)
	}
	ps, err := f.readPointers(ctx, man)
	if err != nil {
		return nil, f.fetchFailed(m.Dataset, staging, err)
	}
	// A job of another size than the one that flushed: node j takes a run
	// of consecutive parts (assignedParts); the namespace shows every node
	// all of them.
	entries := man.ForNodes(assignedParts(man.Nodes, f.o.Nodes, f.self))
	o := f.opts
	o.Limiter = nil // the job waits for its checkpoint: no throttle
	if arrivable(man) && m.route().Kind == cache.KindDir && ctx.Err() == nil {
		if err := os.MkdirAll(staging, 0o700); err != nil {
			return nil, f.fetchFailed(m.Dataset, staging, fmt.Errorf("fetch %s: %w", m.Dataset, err))
		}
		a, err := f.newArrival(m, man, entries, staging)
		if err != nil {
			return nil, f.fetchFailed(m.Dataset, staging, err)
		}
		f.showArrival(a, ps)
		o.Landed, o.Skip = a.landed, a.has
	}
	var meter rateMeter
	start := time.Now()
	meter.begin(start)
	o.Progress = func(done, total int64) {
		rate := meter.update(done, total)
		f.met.rate.WithLabelValues("fetch").Set(rate)
		f.o.Store.Progressing()
		f.fetch.mu.Lock()
		f.fetch.fetching = &Fetching{Dataset: m.Dataset, Done: done, Total: total, Rate: rate}
		f.fetch.mu.Unlock()
	}
	defer func() {
		f.fetch.mu.Lock()
		f.fetch.fetching = nil
		f.fetch.mu.Unlock()
	}()
	err = f.prefix.Fetch(ctx, m.Dataset, staging, entries, o)
	if err == nil && m.RootMode != 0 {
		if err = syscall.Chmod(staging, m.RootMode); err != nil {
			err = fmt.Errorf("fetch %s: mode of its directory: %w", m.Dataset, err)
		}
	}
	f.met.rate.WithLabelValues("fetch").Set(0)
	if err == nil && ps != nil {
		err = cache.SavePointers(staging, ps)
	}
	if err != nil {
		return nil, f.fetchFailed(m.Dataset, staging, err)
	}
	res := fetchReply{Seconds: time.Since(start).Seconds()}
	for _, e := range entries {
		if e.Type == files.Regular {
			res.Files++
			res.Bytes += e.Size
		}
	}
	f.fetch.mu.Lock()
	f.fetch.staged[m.Round] = fetchStage{msg: m, res: res}
	f.fetch.mu.Unlock()
	return res, nil
}

// readPointers reads the pointer files flushed with the dataset of
// manifest man (verified against it, checked): a restart that restores it
// shows them (package pointers); nil if it kept none.
func (f *Flusher) readPointers(ctx context.Context, man *prefix.Manifest) ([]cache.Pointer, error) {
	b, err := f.prefix.ReadPointers(ctx, man)
	if err != nil || b == nil {
		return nil, err
	}
	ps, err := cache.DecodePointers(b)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: the pointer files in the prefix: %w", man.Dataset, err)
	}
	return ps, nil
}

// fetchFailed drops what a failed fetch of dataset staged and returns err
// as the fetch's error: ErrBadCopy when the prefix's copy is to blame, and
// then the mount stops showing it. One that failed for this node's own
// reason is tried again: the mount shows it meanwhile (an empty mount
// would tell a framework there is no checkpoint), until the retry's
// arrival takes its place or the restore gives up (Restore).
func (f *Flusher) fetchFailed(dataset, staging string, err error) error {
	os.RemoveAll(staging)
	if prefix.CopyFault(err) {
		f.endArrival(dataset)
		return fmt.Errorf("%w: %w", ErrBadCopy, err)
	}
	f.log.Warn("fetch failed here for a reason of this node, not of the prefix copy", "dataset", dataset, "err", err)
	return err
}

// handleCommit adopts a staged fetch into the cache, shows it in the mount
// and applies redundancy to it again.
func (f *Flusher) handleCommit(ctx context.Context, from int, m fetchMsg) (any, error) {
	f.fetch.mu.Lock()
	st, ok := f.fetch.staged[m.Round]
	delete(f.fetch.staged, m.Round)
	f.fetch.mu.Unlock()
	if !ok || st.msg.Dataset != m.Dataset {
		return nil, fmt.Errorf("commit fetch of %s: node %d staged nothing in that round", m.Dataset, f.self)
	}
	route := m.route()
	if ds := f.o.Store.Get(m.Dataset); ds != nil {
		// The job could not restore it from its caches (this node's copy
		// is not the whole of it): the verified copy takes its place.
		if err := f.o.Store.Drop(m.Dataset, "the job fetched it from the prefix; the copy here gives way"); err != nil {
			os.RemoveAll(f.o.Store.StagingDir(m.Dataset))
			return nil, err
		}
	}
	_, err := f.o.Store.Adopt(route, cache.Complete, f.o.Store.StagingDir(m.Dataset), m.Seq, m.Completed)
	if err != nil {
		os.RemoveAll(f.o.Store.StagingDir(m.Dataset))
		f.endArrival(m.Dataset)
		return nil, err
	}
	f.adopted(m.Dataset)
	f.mu.Lock()
	f.fetched[m.Dataset] = prefix.IndexEntry{Name: m.Dataset, ID: m.ID}
	f.mu.Unlock()
	// It is in the prefix already: no flush needs to hold it in the cache.
	now := time.Now()
	f.setFlush(m.Dataset, cache.FlushStatus{State: cache.FlushDone, Done: st.res.Bytes, Total: st.res.Bytes, Finished: now})
	f.setOutcome(m.Dataset, outcome{FlushStatus: cache.FlushStatus{State: cache.FlushDone, Finished: now}})
	f.log.Info("dataset fetched", "dataset", m.Dataset, "bytes", st.res.Bytes, "files", st.res.Files,
		"seconds", st.res.Seconds, "rate_mib_s", mibPerSec(st.res.Bytes, st.res.Seconds),
		"from", f.prefix.Locate(m.Dataset))
	return struct{}{}, nil
}

// handleAbort drops a staged fetch.
func (f *Flusher) handleAbort(ctx context.Context, from int, m fetchMsg) (any, error) {
	f.fetch.mu.Lock()
	delete(f.fetch.staged, m.Round)
	f.fetch.mu.Unlock()
	if m.Bad {
		f.endArrival(m.Dataset) // else it is tried again: see fetchFailed
	}
	if err := os.RemoveAll(f.o.Store.StagingDir(m.Dataset)); err != nil {
		return nil, fmt.Errorf("drop staged fetch of %s: %w", m.Dataset, err)
	}
	return struct{}{}, nil
}

// assignedParts returns the parts (the nodes that flushed them, of flushed
// in all) node self of a job of nodes fetches: a run of consecutive parts,
// the runs as even as they divide. A checkpoint written one file per rank
// and loaded on fewer ranks is resharded so: rank r of the smaller job
// reads what ranks r·N/M … (r+1)·N/M−1 of the larger one wrote (a DCP or
// FSDP shard is a contiguous slice of each tensor), which are then on
// its node. In a job of more nodes than flushed, part i goes to one of the
// nodes whose ranks read it (of ranks i·M/N … (i+1)·M/N−1), and some
// nodes fetch none.
func assignedParts(flushed, nodes, self int) []int {
	var out []int
	for i := self * flushed / nodes; i < (self+1)*flushed/nodes; i++ {
		out = append(out, i)
	}
	return out
}
