package transfer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/sleep"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/prefix"
	"github.com/scrfs/scrfs/record"
)

// Restoring at start: the job restores the newest intact checkpoint,
// wherever it is. Every node's restore, once its stock-taking is over,
// asks node 0 ("fetch-join", a long call) and waits for the decision. Node
// 0 compares the newest checkpoint the job's caches hold — its own cache
// shows it after the stock-taking: every recorded dataset that survives in
// the job is there, as node 0's share, a share it hosts, or the record
// alone — with the newest the prefix's index holds complete, verified and
// never failed in a fetch (the one marked current, if set, as SCR does).
// When the prefix's is newer, the job fetches it, and the log says why:
// every node copies its own files of it (the manifest says which node
// flushed what) into a staging directory, verifying CRCs, and only when
// all succeeded do they adopt it into the cache together. A fetch that
// fails for the prefix copy's fault (a corrupt or missing file, a manifest
// that does not verify) is recorded in the index and the next older
// dataset is tried; one that fails for a node's own reason (no space,
// permissions, a node lost) is tried again a few times and never recorded:
// the prefix's copy is not to blame. When nothing newer can be fetched the
// caches' checkpoint stands, and with none the job starts empty and the
// log says so loudly.
//
// Every node of the job must join before a fetch: a node that does not
// (it runs already, or is down) within cluster.connect_timeout +
// restart.member_timeout leaves the caches' checkpoint standing. A node
// that starts while the job runs is told what the job holds now.

// fetchState is the fetch part of the flusher.
type fetchState struct {
	decided    chan struct{} // closed once node 0 coordinates
	decideOnce sync.Once

	// mu protects the fields below.
	mu       sync.Mutex
	coord    *fetchCoord           // node 0, from its restore on
	staged   map[string]fetchStage // fetched and waiting for commit, by round
	restored *Restored             // what this node's restore restored
	fetching *Fetching             // this node's part of a fetch, while it copies
	arrival  *Arrival              // the dataset being fetched as the mount shows it
}

// Fetching is this node's part of a fetch from the prefix while it copies,
// as `scrfs status` shows it.
type Fetching struct {
	Dataset     string
	Done, Total int64   // bytes of this node's part
	Rate        float64 // bytes per second over the last few seconds
}

// fetchCoord is node 0's gathering of the nodes that restore.
type fetchCoord struct {
	done    chan struct{} // closed with outcome set
	outcome fetchOutcome

	// mu protects the fields below.
	mu      sync.Mutex
	joined  map[int]bool
	changed chan struct{}
}

// Where a restored checkpoint came from (Restored.From).
const (
	FromCache  = "cache"
	FromPrefix = "prefix"
	FromNone   = "none"
)

// Restored is the checkpoint a restart restored, as `scrfs status` shows
// it.
type Restored struct {
	Dataset string // "" when none
	From    string // FromCache, FromPrefix or FromNone
	Reason  string // why from there, why none
}

// Messages of the fetch protocol.
type (
	joinMsg struct {
		Node int `json:"node"`
	}
	fetchOutcome struct {
		Dataset string `json:"dataset,omitempty"` // "" = nothing restored
		From    string `json:"from,omitempty"`
		Reason  string `json:"reason,omitempty"`
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
		// RootMode is the dataset directory's mode, from its record (the
		// manifest lists what is inside); 0: as the fetch makes it.
		RootMode uint32 `json:"root_mode,omitempty"`
		// Bad marks a fetch-abort for the fault of the prefix's copy: the
		// dataset will not be tried again.
		Bad bool `json:"bad,omitempty"`
	}
	fetchReply struct {
		Files   int64   `json:"files"`
		Bytes   int64   `json:"bytes"`
		Seconds float64 `json:"seconds"`
	}
)

// Check implements jobnet.Checker.
func (m fetchMsg) Check() error { return layout.CheckRoute(m.Dataset, m.Kind, m.Root) }

// route returns where the fetched dataset sits in the mount: its own
// directory unless its record says otherwise.
func (m fetchMsg) route() cache.Route {
	if m.Kind == "" {
		return cache.Route{Name: m.Dataset, Kind: cache.KindDir, Root: m.Dataset}
	}
	return cache.Route{Name: m.Dataset, Kind: cache.Kind(m.Kind), Root: m.Root}
}

// fetchStage is a node's fetched copy waiting for node 0's commit.
type fetchStage struct {
	msg fetchMsg
	res fetchReply
}

// ErrBadCopy marks a fetch that failed for the fault of the prefix's copy
// of the dataset (prefix.CopyFault), as opposed to one of the node that
// fetched it: only such failures are recorded in the index. Nodes pass it
// on by code (node.ErrorCodes).
var ErrBadCopy = errors.New("the prefix's copy is bad")

// Fetches that fail for a node's own reason are tried again this many
// times, the first after localPause, each pause twice the one before.
const (
	localRetries = 4
	localPause   = 2 * time.Second
)

func (f *Flusher) registerFetch() {
	f.fetch.staged = map[string]fetchStage{}
	jobnet.Handle(f.net, "fetch-join", f.handleJoin)
	jobnet.Handle(f.net, "fetch", f.handleFetch)
	jobnet.Handle(f.net, "fetch-commit", f.handleCommit)
	jobnet.Handle(f.net, "fetch-abort", f.handleAbort)
}

// Restore decides with the job which checkpoint this restart restores,
// fetching it from the prefix when the prefix holds a newer one than the
// caches, and returns once that is done (see the top of this file). The
// daemon's restore calls it once the stock-taking is over.
func (f *Flusher) Restore(ctx context.Context) {
	var out fetchOutcome
	if f.self == 0 {
		out = f.coordinateFetch(ctx)
	} else {
		out = f.joinFetch(ctx)
	}
	r := &Restored{Dataset: out.Dataset, From: out.From, Reason: out.Reason}
	if r.From == "" {
		r.From = FromNone
	}
	f.fetch.mu.Lock()
	f.fetch.restored = r
	a := f.fetch.arrival
	f.fetch.mu.Unlock()
	if a != nil && (r.From != FromPrefix || r.Dataset != a.dataset) {
		f.endArrival(a.dataset) // a fetch that failed for a node's reason, given up
	}
	switch {
	case r.From == FromNone && !out.Fresh:
		f.log.Error("no checkpoint in the cache and none fetched from the prefix: starting with an empty cache", "reason", out.Reason)
	case r.From == FromNone:
		f.log.Info("nothing to restore: no checkpoint was ever completed or flushed", "reason", out.Reason)
	default:
		f.log.Info("the job restored its newest checkpoint", "dataset", r.Dataset, "from", r.From, "reason", r.Reason)
	}
}

// Restored returns what this node's restore restored; nil before it has
// decided.
func (f *Flusher) Restored() *Restored {
	f.fetch.mu.Lock()
	defer f.fetch.mu.Unlock()
	if f.fetch.restored == nil {
		return nil
	}
	r := *f.fetch.restored
	return &r
}

// Fetching returns this node's part of the fetch running now; nil when
// none is.
func (f *Flusher) Fetching() *Fetching {
	f.fetch.mu.Lock()
	defer f.fetch.mu.Unlock()
	if f.fetch.fetching == nil {
		return nil
	}
	p := *f.fetch.fetching
	return &p
}

// joinFetch asks node 0 what the job restores, taking part in a fetch if
// it decides one, and returns its decision.
func (f *Flusher) joinFetch(ctx context.Context) fetchOutcome {
	if err := f.waitLink(ctx, 0); err != nil {
		return f.cachedOutcome("node 0 is unreachable, so the job could not decide: " + err.Error())
	}
	var out fetchOutcome
	if err := f.net.Call(ctx, 0, "fetch-join", joinMsg{Node: f.self}, &out); err != nil {
		return f.cachedOutcome("node 0 was lost while the job decided what to restore: " + err.Error())
	}
	return out
}

// cachedOutcome is the outcome of restoring from this node's cache as it
// is, with reason.
func (f *Flusher) cachedOutcome(reason string) fetchOutcome {
	if name := f.newestCached().Name; name != "" {
		return fetchOutcome{Dataset: name, From: FromCache, Reason: reason}
	}
	return fetchOutcome{From: FromNone, Reason: reason}
}

// newestCached returns the newest recorded dataset in this node's cache
// (the last of Store.Datasets' order): Name is "" if there is none.
func (f *Flusher) newestCached() cache.Info {
	dss := f.o.Store.Datasets()
	for i := len(dss) - 1; i >= 0; i-- {
		if info := dss[i].Info(); info.State.Completed() && info.Seq > 0 {
			return info
		}
	}
	return cache.Info{}
}

// newerThanPrefix says whether cached, the caches' newest, is at least as
// new as the prefix's newest e: by sequence, or completed after e was
// flushed (so after e completed) — a job restarted on fewer nodes, node
// 0's ledger lost, numbers its checkpoints below the history it left.
func newerThanPrefix(cached cache.Info, e prefix.IndexEntry) bool {
	return cached.Seq >= e.ID || (!e.Flushed.IsZero() && cached.Completed.After(e.Flushed))
}

// handleJoin runs on node 0: a node that restores waits for the job's
// decision; one that starts after node 0's restore is over learns what
// the job holds now.
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
	select {
	case <-c.done:
		out := f.cachedOutcome("")
		if out.From == FromNone {
			out = c.outcome
		}
		return out, nil
	default:
	}
	c.mu.Lock()
	c.joined[from] = true
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	select {
	case <-c.done:
		return c.outcome, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// coordinateFetch runs node 0's side of the decision and returns it.
func (f *Flusher) coordinateFetch(ctx context.Context) fetchOutcome {
	c := &fetchCoord{done: make(chan struct{}), joined: map[int]bool{}, changed: make(chan struct{})}
	f.fetch.mu.Lock()
	f.fetch.coord = c
	f.fetch.mu.Unlock()
	f.fetch.decideOnce.Do(func() { close(f.fetch.decided) })
	defer close(c.done)
	c.outcome = f.restoreNewest(ctx, c)
	return c.outcome
}

// restoreNewest decides what the job restores: the caches' newest
// checkpoint, unless the prefix holds a newer one that can be fetched.
func (f *Flusher) restoreNewest(ctx context.Context, c *fetchCoord) fetchOutcome {
	if f.prefix == nil || !f.o.Fetch {
		return f.cachedOutcome("")
	}
	gathered := false
	tries := 0
	for ctx.Err() == nil {
		ix, err := f.prefix.ReadIndex(ctx)
		if err != nil {
			return f.cachedOutcome("the prefix index is unreadable: " + err.Error())
		}
		e, ok := ix.Newest(nil)
		if !ok {
			if len(ix.Datasets) == 0 {
				out := f.cachedOutcome("")
				out.Fresh = true
				return out
			}
			return f.cachedOutcome(f.noCandidate(ix))
		}
		if cached := f.newestCached(); cached.Name != "" && newerThanPrefix(cached, e) {
			return fetchOutcome{Dataset: cached.Name, From: FromCache}
		}
		if !gathered {
			// Only now wait for the others: a job with nothing to fetch
			// must not wait for its slowest node. Their stock-takings may
			// have brought back a newer checkpoint meanwhile.
			if reason := f.gatherJoins(ctx, c); reason != "" {
				return f.cachedOutcome(fmt.Sprintf("the prefix holds %s, newer than what the caches hold, but %s", e.Name, reason))
			}
			gathered = true
			continue
		}
		cached := f.newestCached().Name
		f.log.Info("the prefix holds a checkpoint newer than what the caches hold: fetching it", "dataset", e.Name, "seq", e.ID,
			"cached", cached)
		arrival := f.o.Store.Arriving(e.Name)
		failures, local, fatal := f.tryFetch(ctx, e)
		fetched := fatal == nil && len(failures) == 0 && len(local) == 0
		f.met.round("fetch", fetched)
		if !fetched {
			arrival()
		}
		switch {
		case fetched:
			reason := "newer than what the caches hold"
			if cached != "" {
				reason = "newer than " + cached + ", the newest the caches hold"
			}
			return fetchOutcome{Dataset: e.Name, From: FromPrefix, Reason: reason}
		case len(failures) == 0:
			why := strings.Join(local, "; ")
			if fatal != nil {
				why = fatal.Error()
			}
			if tries++; tries > localRetries {
				return f.cachedOutcome(fmt.Sprintf("the fetch of %s from the prefix failed %d times for reasons of the nodes (%s)", e.Name, tries, why))
			}
			pause := localPause << (tries - 1)
			f.log.Warn("fetch failed for a reason of the node, not of the prefix copy: not recorded in the index; trying again",
				"dataset", e.Name, "reason", why, "in", pause)
			if err := sleep.For(ctx, pause); err != nil {
				return f.cachedOutcome("shutting down")
			}
			continue
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
			return f.cachedOutcome(fmt.Sprintf("fetch of %s failed (%s) and could not be recorded in the index: %v",
				e.Name, failures[0].Reason, err))
		}
		f.log.Warn("fetch failed, recorded in the index; trying an older dataset", "dataset", e.Name,
			"failed_node", failures[0].Node, "reason", failures[0].Reason)
	}
	return f.cachedOutcome("shutting down")
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

// gatherJoins waits until every other node joined the restore. A node
// silent past cluster.connect_timeout + restart.member_timeout (it runs
// already, or is down, or still rebuilding) ends the fetch before it
// starts; the reason says so.
func (f *Flusher) gatherJoins(ctx context.Context, c *fetchCoord) string {
	timeout := f.o.ConnectTimeout + f.o.MemberTimeout
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		c.mu.Lock()
		changed := c.changed
		var missing []int
		for n := 1; n < f.o.Nodes; n++ {
			if !c.joined[n] {
				missing = append(missing, n)
			}
		}
		c.mu.Unlock()
		if len(missing) == 0 {
			return ""
		}
		select {
		case <-changed:
		case <-timer.C:
			return fmt.Sprintf("node %s did not join the restore within %v (it runs already, or is down)", joinInts(missing), timeout)
		case <-ctx.Done():
			return "shutting down"
		}
	}
}

// tryFetch fetches dataset e on every node. Failures for the fault of
// the prefix's copy (a corrupt or missing file, a bad manifest) come back
// for the index; those of a node's own (no space, permissions) as local,
// and a node that cannot be reached as fatal: neither is the dataset's
// fault.
func (f *Flusher) tryFetch(ctx context.Context, e prefix.IndexEntry) (failures []prefix.FetchFailure, local []string, fatal error) {
	log := f.log.With("dataset", e.Name)
	now := time.Now().UTC()
	// A broken or refused manifest fails the dataset without troubling
	// the others.
	man, err := f.prefix.ReadManifest(ctx, e.Name, e.Manifest)
	if err != nil {
		if !copyFault(err) {
			return nil, nil, fmt.Errorf("read the manifest of %s: %w", e.Name, err)
		}
		return []prefix.FetchFailure{{Time: now, Node: f.self, Reason: err.Error()}}, nil, nil
	}
	msg := fetchMsg{Dataset: e.Name, Round: jobnet.NewToken(), ID: e.ID, Kind: e.Kind, Root: e.Root, Seq: e.ID, Completed: e.Flushed,
		Manifest: e.Manifest}
	switch rec, err := f.readPrefixRecord(ctx, man); {
	case err == nil:
		msg.Seq, msg.Completed, msg.RootMode = rec.Seq, rec.Completed, rec.RootMode()
	case record.IsMissing(err):
	case !copyFault(err):
		return nil, nil, err
	default:
		return []prefix.FetchFailure{{Time: now, Node: f.self, Reason: err.Error()}}, nil, nil
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
			switch {
			case err == nil:
			case jobnet.IsRemote(err) || n == f.self:
				errs[n] = err
			default:
				lost[n] = fmt.Errorf("node %d: %w", n, err)
			}
		}()
	}
	wg.Wait()
	for n := range f.o.Nodes {
		var re *jobnet.RemoteError
		switch err := errs[n]; {
		case err == nil:
		case errors.Is(err, ErrBadCopy) && errors.As(err, &re):
			failures = append(failures, prefix.FetchFailure{Time: now, Node: n, Reason: re.Msg})
		default:
			local = append(local, fmt.Sprintf("node %d: %v", n, err))
		}
		if lost[n] != nil && fatal == nil {
			fatal = fmt.Errorf("fetch of %s: %w", e.Name, lost[n])
		}
	}
	kind := "fetch-commit"
	if fatal != nil || len(failures) > 0 || len(local) > 0 {
		kind = "fetch-abort"
	}
	bctx, cancel := context.WithTimeout(ctx, f.o.ConnectTimeout)
	defer cancel()
	end := msg
	end.Bad = len(failures) > 0
	errsCommit := f.net.CallAll(bctx, f.all(), kind, end)
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
	return failures, local, fatal
}

// copyFault says whether err, reading a dataset's manifest or record from
// the prefix, is the fault of the prefix's copy: one the index's entry
// promises and that is missing counts too.
func copyFault(err error) bool {
	return prefix.CopyFault(err) || errors.Is(err, record.ErrBadRecord) || errors.Is(err, fs.ErrNotExist)
}

func joinInts(ns []int) string {
	sort.Ints(ns)
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
