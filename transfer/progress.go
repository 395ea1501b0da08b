package transfer

import (
	"context"
	"fmt"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/control"
)

// Request forwards `scrfs flush` to node 0. Without a name it flushes the
// newest dataset completed on this node.
func (f *Flusher) Request(ctx context.Context, req control.FlushRequest) (*control.FlushReply, error) {
	if f.prefix == "" {
		return nil, errNoPrefix
	}
	name := req.Name
	if name == "" {
		if name = f.newestToFlush(ctx); name == "" {
			return nil, fmt.Errorf("flush: no completed dataset in the cache of node %d: %w", f.self, cache.ErrNotFound)
		}
	} else if f.o.Store.Get(name) == nil {
		return nil, fmt.Errorf("flush %s: not in the cache of node %d: %w", name, f.self, cache.ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, f.o.ConnectTimeout)
	defer cancel()
	var rep requestReply
	err := f.net.Call(ctx, 0, "flush-request", requestMsg{Dataset: name, Force: req.Force, From: f.self}, &rep)
	if err != nil {
		return nil, err // node 0's own words, and its sentinel
	}
	return &control.FlushReply{Name: rep.Dataset, Round: rep.Round, Already: rep.Already}, nil
}

// Progress reports dataset name's flush as this node knows it. With a
// round (from a FlushReply) it reports that round only: "scheduled" until
// this node hears of it, never the outcome of an earlier flush.
func (f *Flusher) Progress(name, round string) (*control.FlushProgress, error) {
	p := &control.FlushProgress{Name: name, Prefix: f.prefix}
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
			p.Flush = out.Flush
		case j != nil && j.round == round:
			p.Flush = f.jobStatus(j, info)
		default:
			p.Flush = control.Flush{State: control.FlushScheduled}
		}
		return p, nil
	}
	switch {
	case j != nil:
		p.Flush = f.jobStatus(j, info)
	case info != nil && info.Flush.State != "":
		p.Flush = FlushStatus(info.Flush)
	case haveOut:
		p.Flush = out.Flush
	default:
		return nil, fmt.Errorf("no flush of %s known on node %d: %w", name, f.self, cache.ErrNotFound)
	}
	return p, nil
}

// jobStatus describes this node's job of a running round.
func (f *Flusher) jobStatus(j *flushJob, info *cache.Info) control.Flush {
	done, total, rate, eta, finished := j.prog.snapshot()
	st := control.Flush{State: control.FlushScheduled, DoneBytes: done, TotalBytes: total, Rate: rate, ETA: eta,
		Started: j.prog.startTime()}
	select {
	case <-j.done:
		if j.err != nil {
			st.State, st.Error = control.FlushFailed, j.err.Error()
			return st
		}
		// This part is durable; the round waits for the others.
		st.State, st.Waiting, st.Rate, st.ETA = control.FlushRunning, true, 0, 0
		return st
	default:
	}
	if !st.Started.IsZero() || finished {
		st.State = control.FlushRunning
	}
	if info != nil && info.Flush.Error != "" {
		st.Error = info.Flush.Error
	}
	return st
}

// FlushStatus is a dataset's flush status as the cache keeps it, in the
// control ABI's form.
func FlushStatus(fs cache.FlushStatus) control.Flush {
	return control.Flush{State: string(fs.State), DoneBytes: fs.Done, TotalBytes: fs.Total,
		Started: fs.Started, Finished: fs.Finished, Error: fs.Error}
}

// AddStatus adds the rate, ETA and "waiting for the other nodes" of
// running flushes to the status rows.
func (f *Flusher) AddStatus(st *control.Status) {
	for i := range st.Datasets {
		row := &st.Datasets[i]
		if row.Flush == nil {
			continue
		}
		f.mu.Lock()
		j := f.jobs[row.Name]
		f.mu.Unlock()
		if j == nil || (row.Flush.State != control.FlushRunning && row.Flush.State != control.FlushScheduled) {
			continue
		}
		js := f.jobStatus(j, nil)
		row.Flush.Rate, row.Flush.ETA, row.Flush.Waiting = js.Rate, js.ETA, js.Waiting
	}
}
