package transfer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/prefix"
	"github.com/scrfs/scrfs/record"
)

// Fetching at start, when no node-local checkpoint survived: node 0 picks
// the dataset from the prefix's index (the one marked current, else the
// newest complete one without a failed fetch, as SCR does), every node
// copies its own files of it (the manifest says which node flushed what)
// into a staging directory, verifying CRCs, and only when all succeeded do
// they adopt it into the cache together. If one fails, node 0 records the
// failure in the index, everyone drops the staged copy, and the next older
// dataset is tried; if none works, the job starts with an empty cache and
// the log says so loudly.
//
// Every node that needs a fetch calls "fetch-join" on node 0 from its
// restore and waits there (a long call) for the outcome; node 0's restore
// coordinates once every node joined. A node that restarted from its own
// cache declines, and node 0 then does not fetch: the nodes would
// otherwise restart from different checkpoints.

// fetchState is the fetch part of the flusher.
type fetchState struct {
	decided    chan struct{} // closed once node 0 knows whether it coordinates a fetch
	decideOnce sync.Once

	// mu protects the fields below.
	mu     sync.Mutex
	coord  *fetchCoord           // node 0, while it coordinates
	joined bool                  // this node asked node 0 for a fetch
	staged map[string]fetchStage // fetched and waiting for commit, by round
}

// fetchCoord is node 0's gathering of the nodes that need a fetch.
type fetchCoord struct {
	done    chan struct{} // closed with outcome set
	outcome fetchOutcome

	// mu protects the fields below.
	mu      sync.Mutex
	want    map[int]bool // node → asked for (true) or declined (false) a fetch
	changed chan struct{}
}

// Messages of the fetch protocol.
type (
	joinMsg struct {
		Node int  `json:"node"`
		Want bool `json:"want"` // false: this node restarted from its cache
	}
	fetchOutcome struct {
		Dataset string `json:"dataset,omitempty"` // "" = nothing fetched
		Reason  string `json:"reason,omitempty"`  // why not
		// Fresh: nothing was ever flushed, as at a job's first start;
		// starting empty is then no news.
		Fresh bool `json:"fresh,omitempty"`
	}
	fetchMsg struct {
		Dataset string `json:"dataset"`
		Round   string `json:"round"`
		ID      uint64 `json:"id"`
		Kind    string `json:"kind,omitempty"`
		Root    string `json:"root,omitempty"`
		// Seq and Completed are the dataset's job-wide completion order and
		// time, from its record in the prefix (the index's id for a flush
		// made before records).
		Seq       uint64    `json:"seq"`
		Completed time.Time `json:"completed,omitzero"`
		// Manifest is the digest of the manifest the index completed:
		// every node reads that one and no other.
		Manifest string `json:"manifest,omitempty"`
	}
	fetchReply struct {
		Files   int64   `json:"files"`
		Bytes   int64   `json:"bytes"`
		Seconds float64 `json:"seconds"`
	}
)

// Check implements jobnet.Checker.
func (m fetchMsg) Check() error { return layout.CheckRoute(m.Dataset, m.Kind, m.Root) }

// fetchStage is a node's fetched copy waiting for node 0's commit.
type fetchStage struct {
	msg fetchMsg
	res fetchReply
}

func (f *Flusher) registerFetch() {
	f.fetch.staged = map[string]fetchStage{}
	jobnet.Handle(f.net, "fetch-join", f.handleJoin)
	jobnet.Handle(f.net, "fetch", f.handleFetch)
	jobnet.Handle(f.net, "fetch-commit", f.handleCommit)
	jobnet.Handle(f.net, "fetch-abort", f.handleAbort)
}

// Fetch fetches the newest usable dataset from the prefix into the cache,
// together with every other node; the daemon's restore calls it when no
// checkpoint is left in the cache, and returns once the fetch is over.
func (f *Flusher) Fetch(ctx context.Context) {
	if f.prefix == nil || !f.o.Fetch {
		return
	}
	if f.self == 0 {
		f.coordinateFetch(ctx)
		return
	}
	f.joinFetch(ctx)
}

// endFetchDecision tells waiting joiners whether node 0 coordinates a fetch.
func (f *Flusher) endFetchDecision() {
	f.fetch.decideOnce.Do(func() { close(f.fetch.decided) })
	f.fetch.mu.Lock()
	joined := f.fetch.joined
	f.fetch.mu.Unlock()
	if f.self != 0 && !joined && f.prefix != nil && f.o.Fetch {
		// Restarted from this node's cache: node 0 must not wait for us.
		f.g.Go(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, 2*f.o.ConnectTimeout)
			defer cancel()
			if err := f.net.Call(ctx, 0, "fetch-join", joinMsg{Node: f.self}, nil); err != nil {
				f.log.Debug("could not tell node 0 this node needs no fetch", "err", err)
			}
		})
	}
}

// joinFetch asks node 0 for a fetch and waits until it is over.
func (f *Flusher) joinFetch(ctx context.Context) {
	f.fetch.mu.Lock()
	f.fetch.joined = true
	f.fetch.mu.Unlock()
	if err := f.waitLink(ctx, 0); err != nil {
		f.log.Error("no checkpoint in the cache and node 0 unreachable, so nothing is fetched from the prefix: starting with an empty cache",
			"err", err)
		return
	}
	var out fetchOutcome
	if err := f.net.Call(ctx, 0, "fetch-join", joinMsg{Node: f.self, Want: true}, &out); err != nil {
		f.log.Error("lost node 0 while fetching from the prefix: starting with an empty cache", "err", err)
		return
	}
	if out.Dataset == "" && !out.Fresh {
		f.log.Error("no checkpoint in the cache and none fetched from the prefix: starting with an empty cache",
			"reason", out.Reason)
	}
}

// handleJoin runs on node 0: a node asks for a fetch (or declines one) and
// waits for the outcome.
func (f *Flusher) handleJoin(ctx context.Context, from int, m joinMsg) (any, error) {
	if f.self != 0 {
		return nil, fmt.Errorf("node %d does not coordinate fetches (node 0 does)", f.self)
	}
	select {
	case <-f.fetch.decided:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f.fetch.mu.Lock()
	c := f.fetch.coord
	f.fetch.mu.Unlock()
	if c == nil {
		return fetchOutcome{Reason: "node 0 did not fetch: it restarted from its own cache"}, nil
	}
	c.mu.Lock()
	c.want[m.Node] = m.Want
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	if !m.Want {
		return fetchOutcome{}, nil
	}
	select {
	case <-c.done:
		return c.outcome, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// coordinateFetch runs node 0's side of a fetch.
func (f *Flusher) coordinateFetch(ctx context.Context) {
	c := &fetchCoord{done: make(chan struct{}), want: map[int]bool{}, changed: make(chan struct{})}
	f.fetch.mu.Lock()
	f.fetch.coord = c
	f.fetch.mu.Unlock()
	f.endFetchDecision()
	defer close(c.done)
	c.outcome = f.fetchNewest(ctx, c)
	if c.outcome.Dataset == "" && !c.outcome.Fresh {
		f.log.Error("no checkpoint in the cache and none fetched from the prefix: starting with an empty cache",
			"reason", c.outcome.Reason, "prefix", f.prefix.String())
	}
}

// fetchNewest tries the candidates newest first until one is fetched.
func (f *Flusher) fetchNewest(ctx context.Context, c *fetchCoord) fetchOutcome {
	gathered := false
	for ctx.Err() == nil {
		ix, err := f.prefix.ReadIndex(ctx)
		if err != nil {
			return fetchOutcome{Reason: "the prefix index is unreadable: " + err.Error()}
		}
		e, ok := ix.Newest(nil)
		if !ok {
			if len(ix.Datasets) == 0 {
				f.log.Info("nothing to fetch: no dataset was flushed to the prefix yet", "prefix", f.prefix.String())
				return fetchOutcome{Reason: "no dataset was flushed to the prefix yet", Fresh: true}
			}
			return fetchOutcome{Reason: f.noCandidate(ix)}
		}
		if !gathered {
			// Only now wait for the others: a fresh job with nothing to
			// fetch must not wait for its slowest node.
			if reason := f.gatherJoins(ctx, c); reason != "" {
				return fetchOutcome{Reason: reason}
			}
			gathered = true
		}
		failures, fatal := f.tryFetch(ctx, e)
		f.met.round("fetch", fatal == nil && len(failures) == 0)
		switch {
		case fatal != nil:
			return fetchOutcome{Reason: fatal.Error()}
		case len(failures) == 0:
			return fetchOutcome{Dataset: e.Name}
		}
		err = f.prefix.UpdateIndex(ctx, f.log, func(ix *prefix.Index) error {
			for _, ff := range failures {
				if err := ix.AddFetchFailure(e.Name, ff); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fetchOutcome{Reason: fmt.Sprintf("fetch of %s failed (%s) and could not be recorded in the index: %v",
				e.Name, failures[0].Reason, err)}
		}
		f.log.Warn("fetch failed, recorded in the index; trying an older dataset", "dataset", e.Name,
			"failed_node", failures[0].Node, "reason", failures[0].Reason)
	}
	return fetchOutcome{Reason: "shutting down"}
}

// noCandidate explains why the index offers nothing to fetch.
func (f *Flusher) noCandidate(ix *prefix.Index) string {
	var failed, flushing, untrusted []string
	for _, e := range ix.Datasets {
		switch {
		case e.State != prefix.StateComplete:
			flushing = append(flushing, e.Name)
		case len(e.FailedFetches) > 0:
			failed = append(failed, e.Name)
		case !ix.Trusted(e):
			untrusted = append(untrusted, e.Name)
		}
	}
	var parts []string
	if len(untrusted) > 0 {
		parts = append(parts, "not signed with this user's prefix key (a MAC that fails, or none: prefix.trust_unsigned): "+
			strings.Join(untrusted, ", "))
	}
	if len(failed) > 0 {
		parts = append(parts, "failed a fetch before: "+strings.Join(failed, ", "))
	}
	if len(flushing) > 0 {
		parts = append(parts, "never completed their flush: "+strings.Join(flushing, ", "))
	}
	if ix.Current != "" {
		parts = append(parts, "nothing older than the current dataset "+ix.Current+" is usable")
	}
	return "no usable dataset in the prefix index: " + strings.Join(parts, "; ")
}

// gatherJoins waits until every other node asked for the fetch. A node
// that declined (restarted from its cache) or stays silent past
// cluster.connect_timeout + restart.member_timeout (it may be rebuilding
// first) ends the fetch before it starts.
func (f *Flusher) gatherJoins(ctx context.Context, c *fetchCoord) string {
	timeout := f.o.ConnectTimeout + f.o.MemberTimeout
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		c.mu.Lock()
		changed := c.changed
		var declined, missing []int
		for n := 1; n < f.o.Nodes; n++ {
			want, ok := c.want[n]
			switch {
			case !ok:
				missing = append(missing, n)
			case !want:
				declined = append(declined, n)
			}
		}
		c.mu.Unlock()
		switch {
		case len(declined) > 0:
			return fmt.Sprintf("node %s restarted from its own cache; fetching would restart the nodes from different checkpoints",
				joinInts(declined))
		case len(missing) == 0:
			return ""
		}
		select {
		case <-changed:
		case <-timer.C:
			return fmt.Sprintf("node %s did not ask for a fetch within %v", joinInts(missing), timeout)
		case <-ctx.Done():
			return "shutting down"
		}
	}
}

// tryFetch fetches dataset e on every node. Failures of the dataset (a
// corrupt or missing file, a bad manifest) come back for the index; a node
// that cannot be reached is fatal to the whole fetch, not the dataset's fault.
func (f *Flusher) tryFetch(ctx context.Context, e prefix.IndexEntry) (failures []prefix.FetchFailure, fatal error) {
	log := f.log.With("dataset", e.Name)
	now := time.Now().UTC()
	// A broken or refused manifest fails the dataset without troubling
	// the others.
	man, err := f.prefix.ReadManifest(ctx, e.Name, e.Manifest)
	if err != nil {
		return []prefix.FetchFailure{{Time: now, Node: f.self, Reason: err.Error()}}, nil
	}
	msg := fetchMsg{Dataset: e.Name, Round: jobnet.NewToken(), ID: e.ID, Kind: e.Kind, Root: e.Root, Seq: e.ID, Completed: e.Flushed,
		Manifest: e.Manifest}
	switch rec, err := f.readPrefixRecord(ctx, man); {
	case err == nil:
		msg.Seq, msg.Completed = rec.Seq, rec.Completed
	case !record.IsMissing(err):
		return []prefix.FetchFailure{{Time: now, Node: f.self, Reason: err.Error()}}, nil
	}
	log.Info("fetching from the prefix", "round", msg.Round, "bytes", e.Bytes, "files", e.Files, "flushed", e.Flushed)
	errs := make([]error, f.o.Nodes)
	lost := make([]error, f.o.Nodes)
	var wg sync.WaitGroup
	for n := range f.o.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n != f.self {
				if err := f.waitLink(ctx, n); err != nil {
					lost[n] = err
					return
				}
			}
			err := f.net.Call(ctx, n, "fetch", msg, nil)
			var re *jobnet.RemoteError
			switch {
			case err == nil:
			case errors.As(err, &re):
				errs[n] = errors.New(re.Msg)
			case n == f.self:
				errs[n] = err
			default:
				lost[n] = fmt.Errorf("node %d: %w", n, err)
			}
		}()
	}
	wg.Wait()
	for n := range f.o.Nodes {
		if errs[n] != nil {
			failures = append(failures, prefix.FetchFailure{Time: now, Node: n, Reason: errs[n].Error()})
		}
		if lost[n] != nil && fatal == nil {
			fatal = fmt.Errorf("fetch of %s: %w", e.Name, lost[n])
		}
	}
	kind := "fetch-commit"
	if fatal != nil || len(failures) > 0 {
		kind = "fetch-abort"
	}
	bctx, cancel := context.WithTimeout(ctx, f.o.ConnectTimeout)
	defer cancel()
	errsCommit := f.net.CallAll(bctx, f.all(), kind, msg)
	for n, err := range errsCommit {
		// A node that staged and cannot adopt now holds nothing: the
		// others restart from e, it from nothing. Say so loudly.
		log.Error("a node could not finish the fetch", "step", kind, "peer", n, "err", err)
	}
	if kind == "fetch-commit" && len(errsCommit) == 0 {
		if ds := f.o.Store.Get(e.Name); ds != nil {
			// Every node holds its share: the dataset gets this job's record
			// and is protected again under today's scheme.
			f.o.Store.Fetched(ds.Name())
		}
	}
	return failures, fatal
}

func joinInts(ns []int) string {
	sort.Ints(ns)
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
