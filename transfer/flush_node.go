package transfer

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/prefix"
	"github.com/scrfs/scrfs/record"
)

// Every node's side of a flush: node 0's "flush" request becomes a job, one
// worker runs the jobs one at a time (a node's flushes share its
// bandwidth; running two at once would only slow both), and the request
// answers when the job's part is durable in the prefix. The job stays until
// node 0 announces the round's outcome, so a request repeated after a
// broken link attaches to it instead of copying again.

// flushJob is this node's part of one round.
type flushJob struct {
	dataset string
	round   string
	created time.Time // the dataset's creation on node 0
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when the part is durable or failed
	over    chan struct{} // closed when the round's outcome is recorded
	res     partReply     // valid once done is closed
	err     error
	prog    rateMeter
}

// handleFlush runs on every node: flush this node's part of a dataset and
// answer once it is durable.
func (f *Flusher) handleFlush(ctx context.Context, from int, m flushMsg) (any, error) {
	if f.prefix == nil {
		return nil, errNoPrefix
	}
	j := f.submit(m)
	select {
	case <-j.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if j.err != nil {
		if f.ctx.Err() != nil {
			return nil, fmt.Errorf("node %d is shutting down", f.self)
		}
		return nil, j.err
	}
	return j.res, nil
}

// submit returns the job of m's round, queueing it if it is new. A job of
// an earlier round of the same dataset is cancelled: the new round's
// BeginFlush removed the parts the old one wrote.
func (f *Flusher) submit(m flushMsg) *flushJob {
	f.mu.Lock()
	old := f.jobs[m.Dataset]
	if old != nil && old.round == m.Round {
		f.mu.Unlock()
		return old
	}
	j := &flushJob{dataset: m.Dataset, round: m.Round, created: m.Created, done: make(chan struct{}), over: make(chan struct{})}
	j.ctx, j.cancel = context.WithCancel(f.ctx)
	f.jobs[m.Dataset] = j
	f.queue = append(f.queue, j)
	f.setCurrentLocked(m.Dataset, m.Round)
	f.mu.Unlock()
	if old != nil {
		old.cancel()
		close(old.over)
	}
	if ds := f.o.Store.Get(m.Dataset); ds != nil {
		f.setFlush(m.Dataset, cache.FlushStatus{State: cache.FlushScheduled})
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return j
}

// worker runs this node's jobs, oldest first, once the restore is over.
func (f *Flusher) worker() {
	select {
	case <-f.started:
	case <-f.ctx.Done():
		return
	}
	for {
		f.mu.Lock()
		var j *flushJob
		if len(f.queue) > 0 {
			j, f.queue = f.queue[0], f.queue[1:]
		}
		f.mu.Unlock()
		if j == nil {
			select {
			case <-f.wake:
				continue
			case <-f.ctx.Done():
				return
			}
		}
		j.res, j.err = f.flushPart(j)
		if j.err != nil && j.ctx.Err() == nil {
			f.log.Warn("this node's part of a flush failed", "dataset", j.dataset, "err", j.err)
			f.setFlush(j.dataset, cache.FlushStatus{State: cache.FlushFailed, Finished: time.Now(), Error: j.err.Error()})
		}
		close(j.done)
		if j.err == nil {
			f.g.Go(func(ctx context.Context) { f.awaitOutcome(ctx, j) })
		}
	}
}

// awaitOutcome runs once this node's part of a round is durable: if node 0
// does not announce the round's outcome within RoundCheck, this node asks
// it (it may have died and come back without the round), again every
// RoundCheck, until the round is over here — so no node stays "flushing"
// because a coordinator went away.
func (f *Flusher) awaitOutcome(ctx context.Context, j *flushJob) {
	t := time.NewTicker(f.o.RoundCheck)
	defer t.Stop()
	for {
		select {
		case <-j.over:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			f.askResume(j.dataset)
		}
	}
}

// prepareMsg opens a round on a node: any job of an earlier round of the
// dataset is stopped before the coordinator touches the prefix.
type prepareMsg struct {
	Dataset string `json:"dataset"`
	Round   string `json:"round"`
}

// Check implements jobnet.Checker.
func (m prepareMsg) Check() error { return layout.CheckDatasetName(m.Dataset) }

// handlePrepare runs on every node before a round begins: it makes the
// round current and stops (and waits for) this node's job of any earlier
// round of the dataset, so no old copy still writes into the prefix while
// the new round's BeginFlush clears it.
func (f *Flusher) handlePrepare(ctx context.Context, from int, m prepareMsg) (any, error) {
	f.mu.Lock()
	f.setCurrentLocked(m.Dataset, m.Round)
	old := f.jobs[m.Dataset]
	if old == nil || old.round == m.Round {
		f.mu.Unlock()
		return struct{}{}, nil
	}
	delete(f.jobs, m.Dataset)
	queued := false
	for i, q := range f.queue {
		if q == old {
			f.queue = append(f.queue[:i:i], f.queue[i+1:]...)
			queued = true
			break
		}
	}
	f.mu.Unlock()
	old.cancel()
	close(old.over)
	if queued {
		old.err = context.Canceled
		close(old.done)
		return struct{}{}, nil
	}
	select {
	case <-old.done:
		return struct{}{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// setCurrentLocked records the newest round this node heard of for a
// dataset: outcomes of older rounds are stale. f.mu must be held.
func (f *Flusher) setCurrentLocked(dataset, round string) {
	f.current[dataset] = round
	if len(f.current) > maxLost {
		for k := range f.current {
			if k != dataset {
				delete(f.current, k)
				break
			}
		}
	}
}

// flushPart copies this node's files of the dataset to the prefix and
// writes its manifest part.
func (f *Flusher) flushPart(j *flushJob) (partReply, error) {
	if err := j.ctx.Err(); err != nil {
		return partReply{}, err
	}
	ds, err := f.awaitDataset(j)
	if err != nil {
		return partReply{}, err
	}
	if ds == nil {
		// Nothing of it was ever written here; node 0's merge still needs
		// this node's (empty) part.
		if err := f.prefix.WritePart(j.ctx, j.dataset, f.self, nil); err != nil {
			return partReply{}, err
		}
		f.log.Info("dataset not in this node's cache: flushed an empty part", "dataset", j.dataset)
		return partReply{}, nil
	}
	unpin := ds.Pin()
	defer unpin()
	start := time.Now()
	j.prog.begin(start)
	f.setFlush(j.dataset, cache.FlushStatus{State: cache.FlushRunning, Started: start})
	o := f.opts
	o.Progress = func(done, total int64) {
		rate := j.prog.update(done, total)
		f.met.rate.WithLabelValues("flush").Set(rate)
		f.setFlush(j.dataset, cache.FlushStatus{State: cache.FlushRunning, Done: done, Total: total, Started: start})
	}
	shares, err := f.shares(j.ctx, ds)
	if err != nil {
		return partReply{}, err
	}
	defer os.RemoveAll(assembledDir(ds))
	var entries []prefix.Entry
	for _, sh := range shares {
		es, err := f.prefix.Flush(j.ctx, j.dataset, sh.dir, f.self, sh.list, o)
		if err != nil {
			f.met.rate.WithLabelValues("flush").Set(0)
			return partReply{}, err
		}
		entries = append(entries, es...)
	}
	f.met.rate.WithLabelValues("flush").Set(0)
	if err := j.ctx.Err(); err != nil {
		return partReply{}, err // a newer round took over: its BeginFlush wants a fresh part
	}
	if err := f.prefix.WritePart(j.ctx, j.dataset, f.self, entries); err != nil {
		return partReply{}, err
	}
	res := partReply{Seconds: time.Since(start).Seconds()}
	for _, e := range entries {
		if e.Type == files.Regular {
			res.Files++
			res.Bytes += e.Size
		}
	}
	j.prog.finish()
	return res, nil
}

// share is a directory of one share of a dataset this node holds, and the
// files it holds.
type share struct {
	dir  string
	list []files.Meta
}

// shares returns the shares of ds this node holds under its record: its
// own (the dataset directory) and those it rebuilt for nodes gone from the
// job, each with its file list as the record has it (completion made the
// list, and the dataset has not changed since: nothing walks the tree
// again). A dataset without a record yet — a flush asked for as it
// completed, before the job agreed the record — is its directory alone,
// listed now.
//
// A file several members wrote is flushed as one file by one node (see
// shared.go): the others leave it out, and that node flushes it from a
// copy put together for the flush.
func (f *Flusher) shares(ctx context.Context, ds *cache.Dataset) ([]share, error) {
	rec, err := record.Load(ds.Dir())
	if err != nil {
		list, err := files.Scan(ds.Dir())
		if err != nil {
			return nil, fmt.Errorf("flush %s, not recorded yet: %w", ds.Name(), err)
		}
		return []share{{dir: ds.Dir(), list: list}}, nil
	}
	shared := sharedFiles(rec)
	var out []share
	for _, m := range rec.Held(f.o.Store.NodeID()) {
		dir := ds.ShareDir(m.ID)
		if !slices.ContainsFunc(out, func(s share) bool { return s.dir == dir }) {
			out = append(out, share{dir: dir, list: withoutShared(m.Files, shared)})
		}
	}
	if as := shared.flushedBy(rec.Held(f.o.Store.NodeID())); len(as) > 0 {
		dir, err := f.assemble(ctx, ds, as)
		if err != nil {
			return nil, err
		}
		out = append(out, share{dir: dir, list: as})
	}
	return out, nil
}

// awaitDataset returns the dataset once it is complete here, or nil when
// this node never had it (its part is empty). A dataset this node had and
// lost, or that is still being written after the wait, is an error: an
// empty part for it would make the prefix claim a dataset without its files.
func (f *Flusher) awaitDataset(j *flushJob) (*cache.Dataset, error) {
	wait := f.o.SettleWait
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	// Completion here has no event of its own before the dataset settles;
	// look again every second as well.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		changed := f.Changes()
		ds := f.o.Store.Get(j.dataset)
		if ds == nil {
			f.mu.Lock()
			why := f.state.lostWhy(j.dataset)
			f.mu.Unlock()
			switch {
			case why != "":
				return nil, fmt.Errorf("node %d no longer holds dataset %s (%s)", f.self, j.dataset, why)
			case j.created.IsZero() || f.o.Started.After(j.created):
				return nil, fmt.Errorf("dataset %s is not in the cache of node %d, whose daemon started after the dataset "+
					"was created: its files on this node may be lost", j.dataset, f.self)
			}
			return nil, nil
		}
		if ds.State().Completed() {
			return ds, nil
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline.C:
			return nil, fmt.Errorf("dataset %s is still %s on node %d after %v", j.dataset, ds.State(), f.self, wait)
		case <-j.ctx.Done():
			return nil, j.ctx.Err()
		}
	}
}

// handleDone runs on every node: node 0 announces how a round ended.
func (f *Flusher) handleDone(ctx context.Context, from int, m doneMsg) (any, error) {
	f.finish(m)
	return struct{}{}, nil
}

// finish records a round's outcome: in the cache's flush status of the
// dataset (if this node holds it), and for `scrfs flush --wait`. An outcome
// of an older round than the newest this node heard of is stale and
// ignored; one without a round (node 0's answer to askResume) is about
// whatever round this node has.
func (f *Flusher) finish(m doneMsg) {
	now := time.Now()
	st := cache.FlushStatus{State: cache.FlushDone, Finished: now}
	if !m.OK {
		st = cache.FlushStatus{State: cache.FlushFailed, Finished: now, Error: m.Error}
	}
	f.mu.Lock()
	if cur := f.current[m.Dataset]; m.Round != "" && cur != "" && cur != m.Round {
		f.mu.Unlock()
		return
	}
	j := f.jobs[m.Dataset]
	delete(f.jobs, m.Dataset)
	f.mu.Unlock()
	var mine partReply
	if j != nil {
		j.cancel() // a failed round: stop a copy still running
		close(j.over)
		select {
		case <-j.done:
			mine = j.res
			st.Done, st.Total = j.prog.bytes()
			st.Started = j.prog.startTime()
		default:
		}
	}
	f.setOutcome(m.Dataset, outcome{round: m.Round, FlushStatus: st})
	if ds := f.o.Store.Get(m.Dataset); ds != nil {
		f.setFlush(m.Dataset, st)
	}
	f.broadcast() // wakes `scrfs flush --wait`
	if !m.OK {
		f.log.Error("dataset flush failed; the dataset stays in the cache", "dataset", m.Dataset, "reason", m.Error)
		return
	}
	f.met.flushed(m.Flushed)
	f.log.Info("dataset flushed", "dataset", m.Dataset, "bytes", mine.Bytes, "files", mine.Files,
		"seconds", mine.Seconds, "rate_mib_s", mibPerSec(mine.Bytes, mine.Seconds),
		"job_bytes", m.Bytes, "job_files", m.Files, "job_seconds", m.Seconds,
		"to", f.prefix.Locate(m.Dataset))
}

// mibPerSec is a rate for log lines.
func mibPerSec(bytes int64, seconds float64) float64 {
	return float64(bytes) / (1 << 20) / max(seconds, 1e-9)
}

// rateMeter follows a copy's progress: bytes done of total and the rate
// over the last few seconds (so a throttled or stalled copy shows it at
// once, where an average since the start would lag).
type rateMeter struct {
	mu          sync.Mutex
	start       time.Time
	done, total int64
	samples     []rateSample // the last rateWindow of updates, oldest first
	finished    bool
}

type rateSample struct {
	at   time.Time
	done int64
}

const rateWindow = 3 * time.Second

func (r *rateMeter) begin(at time.Time) {
	r.mu.Lock()
	r.start, r.samples = at, []rateSample{{at: at}}
	r.mu.Unlock()
}

// update records progress and returns the current rate in bytes per second.
func (r *rateMeter) update(done, total int64) float64 {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done, r.total = done, total
	r.samples = append(r.samples, rateSample{at: now, done: done})
	i := 0
	for i < len(r.samples)-2 && now.Sub(r.samples[i+1].at) >= rateWindow {
		i++
	}
	r.samples = r.samples[i:]
	return r.rateLocked()
}

func (r *rateMeter) rateLocked() float64 {
	if r.finished || len(r.samples) < 2 {
		return 0
	}
	first, last := r.samples[0], r.samples[len(r.samples)-1]
	span := last.at.Sub(first.at).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(last.done-first.done) / span
}

func (r *rateMeter) finish() {
	r.mu.Lock()
	r.finished = true
	r.mu.Unlock()
}

// snapshot returns bytes done and total, the rate, the seconds left at
// that rate (0 if unknown), and whether the copy is over.
func (r *rateMeter) snapshot() (done, total int64, rate, eta float64, finished bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rate = r.rateLocked()
	if rate > 0 && r.total > r.done {
		eta = float64(r.total-r.done) / rate
	}
	return r.done, r.total, rate, eta, r.finished
}

func (r *rateMeter) bytes() (done, total int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done, r.total
}

func (r *rateMeter) startTime() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start
}
