package daemon

import (
	"net/http"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/transfer"
)

// handleFlushRequest serves POST /v1/flush: `scrfs flush [NAME]`.
func (d *Daemon) handleFlushRequest(w http.ResponseWriter, r *http.Request) {
	var req control.FlushRequest
	if !readJSON(w, r, &req) {
		return
	}
	rep, err := d.node.Flusher.Request(r.Context(), req.Name, req.Force)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, control.FlushReply{Name: rep.Dataset, Round: rep.Round, Already: rep.Already})
}

// handleFlushProgress serves GET /v1/flush?name=NAME[&round=R][&wait=D]:
// the dataset's flush, every node's part together; with wait, a flush
// still under way is reported when it ends or after D (at most a minute),
// whichever is first, so `scrfs flush --wait` learns the end at once
// without polling fast.
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
		changed := d.node.Flusher.Changes()
		p, err := d.node.Flusher.DatasetProgress(r.Context(), q.Get("name"), q.Get("round"))
		if err != nil {
			writeError(w, err)
			return
		}
		answer := control.FlushProgress{Name: q.Get("name"), Prefix: d.cfg.Paths.Prefix, Flush: flushABI(p)}
		if p.State == cache.FlushDone || p.State == cache.FlushFailed || wait <= 0 {
			writeJSON(w, http.StatusOK, answer)
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			writeJSON(w, http.StatusOK, answer)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// flushABI is a dataset's flush in the control socket's JSON: the cache's
// flush states are the ABI's (control.FlushScheduled, …) by name.
func flushABI(p transfer.Progress) control.Flush {
	return control.Flush{State: string(p.State), DoneBytes: p.Done, TotalBytes: p.Total,
		Started: p.Started, Finished: p.Finished, Error: p.Error, Rate: p.Rate, ETA: p.ETA, Waiting: p.Waiting}
}

// addFlushRates adds the rate, ETA and "waiting for the other nodes" of
// the flushes running here to the status rows, which the cache's flush
// status alone does not hold.
func (d *Daemon) addFlushRates(st *control.Status) {
	for i := range st.Datasets {
		row := &st.Datasets[i]
		if row.Flush == nil || (row.Flush.State != control.FlushRunning && row.Flush.State != control.FlushScheduled) {
			continue
		}
		if p, ok := d.node.Flusher.Running(row.Name); ok {
			row.Flush.Rate, row.Flush.ETA, row.Flush.Waiting = p.Rate, p.ETA, p.Waiting
		}
	}
}
