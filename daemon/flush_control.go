package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/peer"
)

// handleFlushRequest serves POST /v1/flush: `scrfs flush [NAME]`.
func (d *Daemon) handleFlushRequest(w http.ResponseWriter, r *http.Request) {
	var req control.FlushRequest
	if !readJSON(w, r, &req) {
		return
	}
	reply, err := d.flusher.request(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

// handleFlushProgress serves GET /v1/flush?name=NAME[&round=R][&wait=D]:
// with wait, a flush still under way is reported when it ends or after D
// (at most a minute), whichever is first, so `scrfs flush --wait` learns
// the end at once without polling fast.
func (d *Daemon) handleFlushProgress(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var wait time.Duration
	if s := q.Get("wait"); s != "" {
		var err error
		if wait, err = time.ParseDuration(s); err != nil {
			writeJSON(w, http.StatusBadRequest, control.Error{Err: "bad wait: " + err.Error(), Errno: int32(syscall.EINVAL)})
			return
		}
	}
	deadline := time.NewTimer(min(wait, time.Minute))
	defer deadline.Stop()
	for {
		changed := d.flusher.changes()
		p, err := d.flusher.progress(q.Get("name"), q.Get("round"))
		if err != nil {
			writeError(w, err)
			return
		}
		if p.State == control.FlushDone || p.State == control.FlushFailed || wait <= 0 {
			writeJSON(w, http.StatusOK, p)
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			writeJSON(w, http.StatusOK, p)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// request forwards `scrfs flush` to node 0. Without a name it flushes the
// newest dataset completed on this node.
func (f *flusher) request(ctx context.Context, req control.FlushRequest) (*control.FlushReply, error) {
	if f.prefix == "" {
		return nil, errNoPrefix
	}
	name := req.Name
	if name == "" {
		if name = f.newestCompleted(); name == "" {
			return nil, fmt.Errorf("flush: no completed dataset in the cache of node %d: %w", f.d.node, cache.ErrNotFound)
		}
	} else if f.d.store.Get(name) == nil {
		return nil, fmt.Errorf("flush %s: not in the cache of node %d: %w", name, f.d.node, cache.ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, f.d.broadcastTimeout())
	defer cancel()
	var rep requestReply
	err := f.d.rpc.call(ctx, 0, "flush-request", requestMsg{Dataset: name, Force: req.Force, From: f.d.node}, &rep)
	if err != nil {
		var re *peer.RemoteError
		if errors.As(err, &re) {
			return nil, errors.New(re.Msg) // node 0's own words
		}
		return nil, err
	}
	return &control.FlushReply{Name: rep.Dataset, Round: rep.Round, Already: rep.Already}, nil
}

// progress reports dataset name's flush as this node knows it. With a
// round (from a FlushReply) it reports that round only: "scheduled" until
// this node hears of it, never the outcome of an earlier flush.
func (f *flusher) progress(name, round string) (*control.FlushProgress, error) {
	p := &control.FlushProgress{Name: name, Prefix: f.prefix}
	f.mu.Lock()
	out, haveOut := f.outcomes[name]
	j := f.jobs[name]
	f.mu.Unlock()
	var info *cache.Info
	if ds := f.d.store.Get(name); ds != nil {
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
		p.Flush = flushStatus(info.Flush)
	case haveOut:
		p.Flush = out.Flush
	default:
		return nil, fmt.Errorf("no flush of %s known on node %d: %w", name, f.d.node, cache.ErrNotFound)
	}
	return p, nil
}

// jobStatus describes this node's job of a running round.
func (f *flusher) jobStatus(j *flushJob, info *cache.Info) control.Flush {
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

func flushStatus(fs cache.FlushStatus) control.Flush {
	return control.Flush{State: string(fs.State), DoneBytes: fs.Done, TotalBytes: fs.Total,
		Started: fs.Started, Finished: fs.Finished, Error: fs.Error}
}

// addFlushes adds the rate, ETA and "waiting for the other nodes" of
// running flushes to the status rows.
func (d *Daemon) addFlushes(st *control.Status) {
	if d.flusher == nil {
		return
	}
	f := d.flusher
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
