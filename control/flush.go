package control

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// FlushRequest asks for a dataset to be flushed to the prefix directory
// (POST /v1/flush). The daemon forwards it to node 0, which coordinates
// the flush across the job.
type FlushRequest struct {
	// Name is the dataset; "" means the newest completed dataset.
	Name string `json:"name,omitempty"`
	// Force flushes a dataset again although it was flushed already.
	Force bool `json:"force,omitempty"`
}

// FlushReply is the answer to a FlushRequest.
type FlushReply struct {
	Name string `json:"name"` // the dataset being flushed (resolved when the request named none)
	// Round identifies this flush; FlushProgress with it reports this
	// flush, never the outcome of an earlier one.
	Round string `json:"round,omitempty"`
	// Already is set when the dataset was flushed before and nothing was
	// started (FlushRequest.Force flushes it again).
	Already bool `json:"already,omitempty"`
}

// Flush states as FlushProgress.State and Flush.State report them.
const (
	FlushScheduled = "scheduled"
	FlushRunning   = "flushing"
	FlushDone      = "flushed"
	FlushFailed    = "flush-failed"
)

// FlushProgress is one dataset's flush as this node knows it (GET
// /v1/flush?name=NAME): this node's share of the copy while the flush runs,
// and the job-wide outcome once node 0 announced it. A node that holds no
// file of the dataset still reports the outcome.
type FlushProgress struct {
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
	Flush
}

// Flush asks the daemon to flush dataset name ("" = the newest completed
// one); it returns once the flush is scheduled, not when it is done (see
// FlushProgress). A dataset that does not exist is an *Error with ENOENT.
func (c *Client) Flush(ctx context.Context, name string, force bool) (*FlushReply, error) {
	var r FlushReply
	return &r, c.do(ctx, http.MethodPost, "/v1/flush", FlushRequest{Name: name, Force: force}, &r)
}

// FlushProgress returns how dataset name's flush is going: that of round
// (FlushReply.Round) if given, "scheduled" until this node hears of it;
// else the latest this node knows, and an *Error with ENOENT if none. With
// wait > 0 the daemon answers for a flush under way when it ends or after
// wait, whichever is first (a long poll).
func (c *Client) FlushProgress(ctx context.Context, name, round string, wait time.Duration) (*FlushProgress, error) {
	q := url.Values{"name": {name}}
	if round != "" {
		q.Set("round", round)
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var p FlushProgress
	return &p, c.do(ctx, http.MethodGet, "/v1/flush?"+q.Encode(), nil, &p)
}
