package transfer

import (
	"context"
	"fmt"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/layout"
)

// Progress is a dataset's flush as this node knows it: the state the cache
// keeps (or, once the dataset left the cache, the outcome node 0
// announced), and while this node copies its part, how fast it goes.
type Progress struct {
	cache.FlushStatus
	// Rate is this node's copy rate over the last few seconds, in bytes per
	// second, and ETA the seconds left at that rate; both 0 when no copy is
	// running.
	Rate, ETA float64
	// Waiting is set once this node's part is durable while other nodes
	// are still copying theirs.
	Waiting bool
}

// Requested is node 0's answer to a flush request, as it comes over the
// job's network too.
type Requested struct {
	// Dataset is the dataset being flushed (resolved when the request named
	// none).
	Dataset string `json:"dataset"`
	// Round identifies this flush; Progress with it reports this flush,
	// never the outcome of an earlier one.
	Round string `json:"round,omitempty"`
	// Already is set when the dataset was flushed before and nothing was
	// started.
	Already bool `json:"already,omitempty"`
}

// Request forwards `scrfs flush` to node 0: flush dataset name (the newest
// dataset completed on this node when name is ""), again if force even if
// it was flushed already.
func (f *Flusher) Request(ctx context.Context, name string, force bool) (Requested, error) {
	if f.prefix == nil {
		return Requested{}, errNoPrefix
	}
	if name == "" {
		if name = f.newestToFlush(ctx); name == "" {
			return Requested{}, fmt.Errorf("flush: no completed dataset in the cache of node %d: %w", f.self, cache.ErrNotFound)
		}
	} else if f.o.Store.Get(name) == nil {
		return Requested{}, fmt.Errorf("flush %s: not in the cache of node %d: %w", name, f.self, cache.ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, f.o.ConnectTimeout)
	defer cancel()
	var rep Requested
	err := f.net.Call(ctx, 0, "flush-request", requestMsg{Dataset: name, Force: force, From: f.self}, &rep)
	if err != nil {
		return Requested{}, err // node 0's own words, and its sentinel
	}
	return rep, nil
}

// Progress reports dataset name's flush as this node knows it. With a
// round (from Requested) it reports that round only: "scheduled" until
// this node hears of it, never the outcome of an earlier flush.
func (f *Flusher) Progress(name, round string) (Progress, error) {
	f.mu.Lock()
	out, haveOut := f.outcomes[name]
	j := f.jobs[name]
	f.mu.Unlock()
	var info *cache.Info
	if ds := f.o.Store.Get(name); ds != nil {
		i := ds.Info()
		info = &i
	}
	if round != "" {
		switch {
		case haveOut && out.round == round:
			return Progress{FlushStatus: out.FlushStatus}, nil
		case j != nil && j.round == round:
			return f.jobStatus(j, info), nil
		}
		return Progress{FlushStatus: cache.FlushStatus{State: cache.FlushScheduled}}, nil
	}
	switch {
	case j != nil:
		return f.jobStatus(j, info), nil
	case info != nil && info.Flush.State != "":
		return Progress{FlushStatus: info.Flush}, nil
	case haveOut:
		return Progress{FlushStatus: out.FlushStatus}, nil
	}
	return Progress{}, fmt.Errorf("no flush of %s known on node %d: %w", name, f.self, cache.ErrNotFound)
}

// progressReq asks a node how its part of a round of a dataset goes.
type progressReq struct {
	Dataset string `json:"dataset"`
	Round   string `json:"round,omitempty"`
}

// Check implements jobnet.Checker.
func (m progressReq) Check() error { return layout.CheckDatasetName(m.Dataset) }

// partProgress is a node's part of a round: Known when the node has one.
type partProgress struct {
	Done  int64   `json:"done"`
	Total int64   `json:"total"`
	Rate  float64 `json:"rate"`
	Known bool    `json:"known"`
}

func (f *Flusher) handleProgress(ctx context.Context, from int, m progressReq) (any, error) {
	f.mu.Lock()
	j := f.jobs[m.Dataset]
	f.mu.Unlock()
	if j == nil || (m.Round != "" && j.round != m.Round) {
		return partProgress{}, nil
	}
	p := f.jobStatus(j, nil)
	return partProgress{Done: p.Done, Total: p.Total, Rate: p.Rate, Known: true}, nil
}

// progressAsk bounds how long DatasetProgress waits for the nodes' parts.
const progressAsk = time.Second

// DatasetProgress is Progress for the whole dataset while a round of it
// runs, as `scrfs flush --wait` shows it: the bytes every node's part has
// copied and has to copy, and their rates, together (asked of every node,
// each within a second; a node that does not answer is left out). Its
// state is this node's view of the round.
func (f *Flusher) DatasetProgress(ctx context.Context, name, round string) (Progress, error) {
	p, err := f.Progress(name, round)
	if err != nil || f.o.Nodes == 1 || (p.State != cache.FlushRunning && p.State != cache.FlushScheduled) {
		return p, err
	}
	ctx, cancel := context.WithTimeout(ctx, progressAsk)
	defer cancel()
	var sum partProgress
	for _, r := range f.net.Fanout(ctx, f.all(), "flush-progress", progressReq{Dataset: name, Round: round}) {
		var pp partProgress
		if r.Decode(&pp) == nil && pp.Known {
			sum.Done, sum.Total, sum.Rate, sum.Known = sum.Done+pp.Done, sum.Total+pp.Total, sum.Rate+pp.Rate, true
		}
	}
	if !sum.Known {
		return p, nil
	}
	p.Done, p.Total, p.Rate, p.ETA = sum.Done, sum.Total, sum.Rate, 0
	if sum.Rate > 0 {
		p.ETA = float64(sum.Total-sum.Done) / sum.Rate
	}
	if sum.Done > 0 && p.State == cache.FlushScheduled {
		p.State = cache.FlushRunning
	}
	// This node's part may be durable while others copy: the dataset's
	// flush is running, not waiting, until every part is.
	p.Waiting = p.Waiting && sum.Done >= sum.Total
	return p, nil
}

// Running returns how this node's part of a round of dataset name goes
// while the round is under way here: the rate, ETA and "waiting for the
// other nodes" that the cache's flush status does not hold.
func (f *Flusher) Running(name string) (Progress, bool) {
	f.mu.Lock()
	j := f.jobs[name]
	f.mu.Unlock()
	if j == nil {
		return Progress{}, false
	}
	return f.jobStatus(j, nil), true
}

// jobStatus describes this node's job of a running round.
func (f *Flusher) jobStatus(j *flushJob, info *cache.Info) Progress {
	done, total, rate, eta, finished := j.prog.snapshot()
	st := Progress{FlushStatus: cache.FlushStatus{State: cache.FlushScheduled, Done: done, Total: total,
		Started: j.prog.startTime()}, Rate: rate, ETA: eta}
	select {
	case <-j.done:
		if j.err != nil {
			st.State, st.Error = cache.FlushFailed, j.err.Error()
			return st
		}
		// This part is durable; the round waits for the others.
		st.State, st.Waiting, st.Rate, st.ETA = cache.FlushRunning, true, 0, 0
		return st
	default:
	}
	if !st.Started.IsZero() || finished {
		st.State = cache.FlushRunning
	}
	if info != nil && info.Flush.Error != "" {
		st.Error = info.Flush.Error
	}
	return st
}
