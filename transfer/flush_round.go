package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/prefix"
	"github.com/scrfs/scrfs/record"
)

// Messages of the flush protocol.
type (
	// requestMsg asks node 0 to flush a dataset.
	requestMsg struct {
		Dataset string `json:"dataset"`
		Force   bool   `json:"force,omitempty"`
		From    int    `json:"from"`
	}
	// resumeMsg asks node 0 about a flush a restart interrupted.
	resumeMsg struct {
		Dataset string `json:"dataset"`
		From    int    `json:"from"`
	}
	resumeReply struct {
		Over  bool   `json:"over"` // the round ended (OK and Error say how) or was abandoned
		OK    bool   `json:"ok,omitempty"`
		Error string `json:"error,omitempty"`
	}
	// flushMsg tells a node to flush its part; the answer is its report.
	flushMsg struct {
		Dataset string    `json:"dataset"`
		Round   string    `json:"round"`
		Created time.Time `json:"created"` // when node 0 created the dataset
	}
	partReply struct {
		Files   int64   `json:"files"`
		Bytes   int64   `json:"bytes"`
		Seconds float64 `json:"seconds"`
	}
	// doneMsg announces a round's outcome to every node.
	doneMsg struct {
		Dataset string    `json:"dataset"`
		Round   string    `json:"round"`
		OK      bool      `json:"ok"`
		Error   string    `json:"error,omitempty"`
		Flushed time.Time `json:"flushed,omitzero"`
		Files   int64     `json:"files,omitempty"` // job-wide totals
		Bytes   int64     `json:"bytes,omitempty"`
		Seconds float64   `json:"seconds,omitempty"`
	}
)

// Check implements jobnet.Checker; "" asks for the newest dataset.
func (m requestMsg) Check() error {
	if m.Dataset == "" {
		return nil
	}
	return layout.CheckDatasetName(m.Dataset)
}

// Check implements jobnet.Checker.
func (m resumeMsg) Check() error { return layout.CheckDatasetName(m.Dataset) }

// Check implements jobnet.Checker.
func (m flushMsg) Check() error { return layout.CheckDatasetName(m.Dataset) }

// Check implements jobnet.Checker.
func (m doneMsg) Check() error { return layout.CheckDatasetName(m.Dataset) }

// flushRound is node 0's view of one dataset's flush across the job.
type flushRound struct {
	dataset string
	token   string
	reason  string
}

// handleRequest runs on node 0: `scrfs flush` on some node.
func (f *Flusher) handleRequest(ctx context.Context, from int, m requestMsg) (any, error) {
	if f.self != 0 {
		return nil, fmt.Errorf("node %d does not coordinate flushes (node 0 does)", f.self)
	}
	name := m.Dataset
	if name == "" {
		if name = f.newestToFlush(ctx); name == "" {
			return nil, fmt.Errorf("node 0 has no completed dataset to flush: %w", cache.ErrNotFound)
		}
	}
	reason := "scrfs flush on node " + strconv.Itoa(m.From)
	r, already, err := f.startRound(name, m.Force, reason)
	if err != nil {
		return nil, err
	}
	rep := Requested{Dataset: name, Already: already}
	if r != nil {
		rep.Round = r.token
	}
	return rep, nil
}

// completionSettle bounds how long a flush of the newest dataset waits for
// a newer one whose completion waits only for files still open for
// writing.
const completionSettle = 10 * time.Second

// newestToFlush returns the dataset a flush without a name is for: the
// newest completed one in this node's cache, once a newer one whose
// completion was requested has completed (or after completionSettle, or
// when ctx ends, with a warning), or "".
func (f *Flusher) newestToFlush(ctx context.Context) string {
	start := time.Now()
	timer := time.NewTimer(completionSettle)
	defer timer.Stop()
	for {
		changed := f.Changes()
		name, pending := f.newestCompleted()
		if pending == "" {
			return name
		}
		select {
		case <-changed:
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		f.log.Warn("flushing the newest completed dataset: a newer one's completion still waits for files open for writing",
			"dataset", name, "waiting", pending, "waited", time.Since(start).Round(time.Millisecond))
		return name
	}
}

// newestCompleted returns the newest dataset in this node's cache that
// completed, and the name of a newer one whose completion was requested
// and waits only for files still open for writing ("" if none): an
// application that renames its marker into place and exits may still have
// the last release of a file on its way. Newest is by the job's order,
// which Store.Datasets lists: this node's own order of creation differs
// once it rebuilt or fetched datasets in another order.
func (f *Flusher) newestCompleted() (name, pending string) {
	dss := f.o.Store.Datasets()
	var newest *cache.Info
	var pendingInfo *cache.Info
	for _, ds := range dss {
		info := ds.Info()
		switch {
		case info.State.Completed():
			newest = &info
		case info.State == cache.Writing && info.Completing != "":
			if pendingInfo == nil || info.ID > pendingInfo.ID {
				pendingInfo = &info
			}
		}
	}
	if pendingInfo != nil && (newest == nil || pendingInfo.ID > newest.ID) {
		pending = pendingInfo.Name
	}
	if newest == nil {
		return "", pending
	}
	return newest.Name, pending
}

// startRound starts flushing dataset name across the job, or returns the
// round already doing so. Unless force is set, a dataset node 0 has
// flushed before is not flushed again (already). Node 0 only.
func (f *Flusher) startRound(name string, force bool, why string) (r *flushRound, already bool, err error) {
	if f.prefix == nil {
		return nil, false, errNoPrefix
	}
	ds := f.o.Store.Get(name)
	if ds == nil {
		return nil, false, fmt.Errorf("flush %s: not in the cache of node 0: %w", name, cache.ErrNotFound)
	}
	info := ds.Info()
	if !info.State.Completed() {
		return nil, false, fmt.Errorf("flush %s: the dataset is %s, not complete (scrfs complete %s completes it)",
			name, info.State, name)
	}
	f.mu.Lock()
	if r := f.rounds[name]; r != nil {
		f.mu.Unlock()
		return r, false, nil
	}
	if !force && info.Flush.State == cache.FlushDone {
		f.mu.Unlock()
		return nil, true, nil
	}
	r = &flushRound{dataset: name, token: jobnet.NewToken(), reason: why}
	f.rounds[name] = r
	f.mu.Unlock()
	// Held for the round: the node's own part pins it too, but only once
	// the worker gets to it.
	unpin := ds.Pin()
	// The durable intent: a node 0 that dies before the index says
	// anything redoes the round when it comes back.
	f.setFlush(name, cache.FlushStatus{State: cache.FlushScheduled})
	if !f.g.Go(func(context.Context) {
		defer unpin()
		f.runRound(r, info)
	}) {
		unpin()
		f.endRound(r)
		return nil, false, errClosing
	}
	return r, false, nil
}

// runRound flushes one dataset across the job and announces the outcome.
func (f *Flusher) runRound(r *flushRound, info cache.Info) {
	ctx := f.ctx
	start := time.Now()
	log := f.log.With("dataset", r.dataset, "round", r.token)
	log.Info("flush started", "reason", r.reason, "nodes", f.o.Nodes, "prefix", f.prefix.String())
	entry := prefix.IndexEntry{Name: r.dataset, ID: info.ID, Nodes: f.o.Nodes, Kind: string(info.Kind), Root: info.Root}
	if info.Seq > 0 {
		entry.ID = info.Seq // the job-wide order, the same on every node and across allocations
	}
	f.mu.Lock()
	if e, ok := f.fetched[r.dataset]; ok {
		// Flushed again after a fetch: keep its place among the others.
		entry.ID = e.ID
	}
	f.mu.Unlock()

	var reasons []string
	var m *prefix.Manifest
	if err := f.prepare(ctx, r); err != nil {
		// Nothing in the prefix was touched: an old copy may still write.
		reasons = append(reasons, err.Error())
	} else if err := f.prefix.BeginFlush(ctx, entry, f.log); err != nil {
		reasons = append(reasons, "node 0: "+err.Error())
	} else {
		parts, answered := f.collectParts(ctx, r, info.Created)
		for _, err := range parts {
			if err != nil {
				reasons = append(reasons, err.Error())
			}
		}
		var rec, ptrs []byte
		if len(reasons) == 0 {
			var err error
			if rec, ptrs, err = f.prefixRecord(r.dataset); err != nil {
				reasons = append(reasons, "node 0: "+err.Error())
			}
		}
		if len(reasons) == 0 {
			var err error
			if m, err = f.prefix.CompleteFlush(ctx, r.dataset, f.o.Nodes, rec, ptrs, f.log); err != nil {
				reasons = append(reasons, "node 0: "+err.Error())
			}
		}
		if len(reasons) > 0 && ctx.Err() == nil {
			f.cleanup(r.dataset, answered, log)
		}
	}
	if ctx.Err() != nil {
		// Shutting down: the intent stays recorded and the round is redone
		// after the restart.
		f.endRound(r)
		return
	}
	msg := doneMsg{Dataset: r.dataset, Round: r.token, OK: len(reasons) == 0, Error: strings.Join(reasons, "; "),
		Seconds: time.Since(start).Seconds()}
	if m != nil {
		msg.Flushed, msg.Files, msg.Bytes = time.Now().UTC(), m.Files, m.Bytes
	}
	f.met.round("flush", msg.OK)
	bctx, cancel := context.WithTimeout(ctx, f.o.ConnectTimeout)
	for n, r := range f.net.Fanout(bctx, f.all(), "flush-done", msg) {
		if r.Err != nil {
			log.Warn("could not tell a node how the flush ended", "to", n, "err", r.Err)
		}
	}
	cancel()
	f.endRound(r)
}

func (f *Flusher) endRound(r *flushRound) {
	f.mu.Lock()
	if f.rounds[r.dataset] == r {
		delete(f.rounds, r.dataset)
	}
	f.mu.Unlock()
}

// collectParts asks every node for its part, concurrently, and returns each
// node's error (nil: its part is durable). answered is false when some
// node could not be reached: it may still be writing into the prefix.
func (f *Flusher) collectParts(ctx context.Context, r *flushRound, created time.Time) (errs []error, answered bool) {
	errs = make([]error, f.o.Nodes)
	reached := make([]bool, f.o.Nodes)
	msg := flushMsg{Dataset: r.dataset, Round: r.token, Created: created}
	var wg sync.WaitGroup
	for n := range f.o.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[n], reached[n] = f.callPart(ctx, n, msg)
		}()
	}
	wg.Wait()
	answered = true
	for _, ok := range reached {
		answered = answered && ok
	}
	return errs, answered
}

// prepare opens round r on every node, which stops its copies of earlier
// rounds of the dataset first (a fan-out: node 0's messages do not grow
// with the job). A node that cannot be reached within
// cluster.connect_timeout fails the round before the prefix is touched.
func (f *Flusher) prepare(ctx context.Context, r *flushRound) error {
	ctx, cancel := context.WithTimeout(ctx, f.o.ConnectTimeout)
	defer cancel()
	var errs []error
	replies := f.net.Fanout(ctx, f.all(), "flush-prepare", prepareMsg{Dataset: r.dataset, Round: r.token})
	for n := range f.o.Nodes {
		if rep := replies[n]; rep.Err != nil {
			errs = append(errs, fmt.Errorf("node %d did not stop its earlier copy: %w", n, rep.Err))
		}
	}
	return errors.Join(errs...)
}

// callPart asks node n for its part. The answer comes when the part is
// durable, which may take long; if the link breaks meanwhile (the node
// restarted, say), node n gets cluster.connect_timeout to come back, and is
// then asked again under the same round: a node still working on it
// attaches to its running copy, a restarted one starts over.
func (f *Flusher) callPart(ctx context.Context, n int, msg flushMsg) (err error, reached bool) {
	for {
		if n != f.self {
			if err := f.waitLink(ctx, n); err != nil {
				return err, false
			}
		}
		var res partReply
		err := f.net.Call(ctx, n, "flush", msg, &res)
		var re *jobnet.RemoteError
		switch {
		case err == nil:
			return nil, true
		case errors.As(err, &re):
			return fmt.Errorf("node %d: %s", n, re.Msg), true
		case n == f.self:
			return fmt.Errorf("node %d: %w", n, err), true
		case ctx.Err() != nil:
			return err, false
		}
		f.log.Warn("lost the link to a node during its flush; waiting for it to come back",
			"dataset", msg.Dataset, "peer", n, "err", err)
	}
}

// waitLink waits for the link to node n, at most cluster.connect_timeout.
func (f *Flusher) waitLink(ctx context.Context, n int) error {
	timeout := f.o.ConnectTimeout
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := f.o.Mux.WaitUp(wctx, []int{n}); err != nil {
		return fmt.Errorf("node %d unreachable for %v (cluster.connect_timeout): %v", n, timeout, err)
	}
	return nil
}

// cleanup removes what a failed round left in the prefix, so a flush that
// ran out of space gives the space back and `scrfs list` shows no
// half-flushed dataset. If a node was unreachable it may still be writing
// there; then the dataset stays "flushing" in the index, which no fetch
// uses, until the next flush of it.
func (f *Flusher) cleanup(name string, answered bool, log *slog.Logger) {
	if !answered {
		log.Warn("flush failed with a node unreachable; its partial files stay in the prefix until the dataset is flushed again",
			"at", f.prefix.Locate(name))
		return
	}
	ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	if err := f.prefix.RemoveDataset(ctx, name, f.log); err != nil {
		log.Warn("could not remove the failed flush from the prefix", "err", err)
		return
	}
	log.Info("removed the failed flush from the prefix", "at", f.prefix.Locate(name))
}

// handleResume runs on node 0: a node restarted with a flush of name
// scheduled and asks what became of it.
func (f *Flusher) handleResume(ctx context.Context, from int, m resumeMsg) (any, error) {
	f.mu.Lock()
	active := f.rounds[m.Dataset] != nil
	out, known := f.outcomes[m.Dataset]
	f.mu.Unlock()
	switch {
	case active:
		// The round asks that node again once its link is back.
		return resumeReply{}, nil
	case known && (out.State == cache.FlushDone || out.State == cache.FlushFailed):
		return resumeReply{Over: true, OK: out.State == cache.FlushDone, Error: out.Error}, nil
	}
	if ds := f.o.Store.Get(m.Dataset); ds != nil {
		// Node 0 restarted too, forgetting outcomes; its cache remembers.
		switch st := ds.Info().Flush; st.State {
		case cache.FlushDone:
			return resumeReply{Over: true, OK: true}, nil
		case cache.FlushFailed:
			return resumeReply{Over: true, Error: st.Error}, nil
		}
	}
	if _, _, err := f.startRound(m.Dataset, true, "resumed for node "+strconv.Itoa(m.From)); err != nil {
		return resumeReply{Over: true, Error: "abandoned: " + err.Error()}, nil
	}
	return resumeReply{}, nil
}

// setFlush records a dataset's flush status in the cache; a dataset that
// left the cache meanwhile has no status to keep.
func (f *Flusher) setFlush(name string, st cache.FlushStatus) {
	if err := f.o.Store.SetFlush(name, st); err != nil && !errors.Is(err, cache.ErrNotFound) {
		f.log.Warn("record flush status", "dataset", name, "state", st.State, "err", err)
	}
}

// prefixRecord returns node 0's record of a dataset and the pointer files
// kept with it, for CompleteFlush to keep beside its manifest before the
// index calls the dataset complete: a fetch then restores its place in the
// job's order, and its pointer files. A dataset completed before records
// existed has none (nil), one that kept no pointer files none of those.
func (f *Flusher) prefixRecord(name string) (rec, pointers []byte, err error) {
	ds := f.o.Store.Get(name)
	if ds == nil {
		return nil, nil, fmt.Errorf("dataset %s left the cache of node 0", name)
	}
	if ps, err := cache.LoadPointers(ds.Dir()); err != nil {
		return nil, nil, err
	} else if ps != nil {
		if pointers, err = cache.EncodePointers(ps); err != nil {
			return nil, nil, err
		}
	}
	r, err := record.Load(ds.Dir())
	if record.IsMissing(err) {
		return nil, pointers, nil
	}
	if err != nil {
		return nil, nil, err
	}
	rec, err = r.Marshal()
	return rec, pointers, err
}

// readPrefixRecord reads the record kept beside manifest m in the prefix
// (checked against m's digest of it), as untrusted input; one missing is
// an error record.IsMissing recognises.
func (f *Flusher) readPrefixRecord(ctx context.Context, m *prefix.Manifest) (*record.Record, error) {
	b, err := f.prefix.ReadRecord(ctx, m)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("no record beside the manifest of %s: %w", m.Dataset, os.ErrNotExist)
	}
	rec, err := record.Decode(b)
	if err == nil && rec.Dataset != m.Dataset {
		err = fmt.Errorf("%w: the record of %s is in the place of %s", record.ErrBadRecord, rec.Dataset, m.Dataset)
	}
	if err != nil {
		return nil, fmt.Errorf("the record of %s in the prefix: %w", m.Dataset, err)
	}
	return rec, nil
}
