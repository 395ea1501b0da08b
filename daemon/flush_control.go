package daemon

import (
	"net/http"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/control"
)

// handleFlushRequest serves POST /v1/flush: `scrfs flush [NAME]`.
func (d *Daemon) handleFlushRequest(w http.ResponseWriter, r *http.Request) {
	var req control.FlushRequest
	if !readJSON(w, r, &req) {
		return
	}
	reply, err := d.node.Flusher.Request(r.Context(), req)
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
		changed := d.node.Flusher.Changes()
		p, err := d.node.Flusher.Progress(q.Get("name"), q.Get("round"))
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
