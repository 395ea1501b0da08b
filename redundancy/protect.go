package redundancy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/sleep"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
)

// Protecting a dataset: once it is complete on a node, that node reports
// ready to its set's coordinator (the member of rank 0). When every member
// is ready the coordinator tells them all to encode, under a fresh attempt
// token that names the streams; if one is not ready within Timeout it
// tells the ready ones the dataset stays unprotected (degraded) and why.
// One verdict for everyone means members never disagree about whether an
// encode happens. Each protect belongs to a try: "" for the one the record
// starts, the stock-taking's token for one it asks for. Readies gather,
// and verdicts go, per try, so a try that a later one replaced (a member
// restarted meanwhile) never mixes with it.

// readyMsg tells the coordinator a member has a dataset complete.
type readyMsg struct {
	Dataset string `json:"dataset"`
	Rank    int    `json:"rank"`
	// Nodes are the set's members by rank, as the dataset's record has them.
	Nodes []int  `json:"nodes"`
	Try   string `json:"try,omitempty"`
}

// verdictMsg is the coordinator's answer to every member.
type verdictMsg struct {
	Dataset string `json:"dataset"`
	Try     string `json:"try,omitempty"`
	Attempt string `json:"attempt,omitempty"` // set when the members encode
	Reason  string `json:"reason,omitempty"`  // why not, when Attempt is empty
}

// Check implements jobnet.Checker.
func (m readyMsg) Check() error { return layout.CheckDatasetName(m.Dataset) }

// Check implements jobnet.Checker.
func (m verdictMsg) Check() error { return layout.CheckDatasetName(m.Dataset) }

// round is the coordinator's view of one try's readiness.
type round struct {
	nodes []int // the set's members by rank
	ready map[int]bool
	timer *time.Timer
}

// roundKey names a round: a dataset's try.
type roundKey struct{ dataset, try string }

// waiter is a member's protect waiting for its try's verdict.
type waiter struct {
	try string
	ch  chan verdictMsg // buffered, 1
}

// Protect applies redundancy to a dataset whose record the job just
// agreed, in the background, under the record's scheme and sets. It always
// ends with the dataset protected, degraded with a reason, or (SINGLE)
// recorded with its metadata, and then Store.Settled; unless the
// Protector closes first.
//
// One protect of a dataset runs on a node at a time. Asked again while one
// runs (stock-takings found it never encoded, a member restarted), the
// later one takes over: the earlier is cancelled, and the later starts once
// it is gone. Two at once had two encodes write the same redundancy file
// and fail each other; and an earlier one left to finish would wait on an
// attempt a restarted member never joins, out of step with the others'
// new one, and the set would stay degraded with every node up.
func (p *Protector) Protect(rec *record.Record) { p.protectTry(rec, "") }

// protectTry is Protect for a try the stock-taking asked for.
func (p *Protector) protectTry(rec *record.Record, try string) {
	name := rec.Dataset
	cur := &protecting{done: make(chan struct{})}
	p.mu.Lock()
	prev := p.protecting[name]
	p.protecting[name] = cur
	p.mu.Unlock()
	if prev != nil {
		prev.supersede()
	}
	started := p.g.Go(func(ctx context.Context) {
		defer close(cur.done)
		defer func() {
			p.mu.Lock()
			if p.protecting[name] == cur {
				delete(p.protecting, name)
			}
			p.mu.Unlock()
		}()
		if prev != nil {
			select {
			case <-prev.done:
			case <-ctx.Done():
				return
			}
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if !cur.start(cancel) {
			return // superseded before it began
		}
		p.protect(ctx, rec, try, cur)
	})
	if !started {
		close(cur.done)
	}
}

// protecting is one protect of a dataset on this node.
type protecting struct {
	done chan struct{} // closed when it has ended

	mu         sync.Mutex
	cancel     context.CancelFunc // nil until it starts
	superseded bool
}

// start hands over the protect's cancel; false if it was superseded
// already.
func (pr *protecting) start(cancel context.CancelFunc) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.cancel = cancel
	return !pr.superseded
}

// supersede cancels the protect: a later one takes over.
func (pr *protecting) supersede() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.superseded = true
	if pr.cancel != nil {
		pr.cancel()
	}
}

// wasSuperseded says whether a later protect took over.
func (pr *protecting) wasSuperseded() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.superseded
}

// operation returns the scheme parameters of a recorded dataset's set and
// this node's member view of it, with its files in dir: the member whose
// share this node holds.
func (p *Protector) operation(rec *record.Record, dir string) (schemes.Params, schemes.Member, error) {
	for i := range rec.Members {
		if m := &rec.Members[i]; m.HeldBy() == p.o.Store.NodeID() {
			return p.operationAs(rec, m, dir)
		}
	}
	return schemes.Params{}, schemes.Member{}, fmt.Errorf("this node (%s) holds no share of the record", p.o.Store.NodeID())
}

// paramsOf returns the scheme parameters of a set of members of rec's
// dataset, as an encode or rebuild of it must use them.
func paramsOf(rec *record.Record, members int) (schemes.Params, error) {
	kind, err := schemes.ParseKind(rec.Scheme.Kind)
	if err != nil {
		return schemes.Params{}, err
	}
	p := schemes.Params{Kind: kind, Size: members, Replicas: rec.Scheme.Replicas, Parity: rec.Scheme.Parity,
		PieceSize: rec.Scheme.PieceSize}
	return p, p.Validate()
}

// operationAs is operation for this node playing member me.
func (p *Protector) operationAs(rec *record.Record, me *record.Member, dir string) (schemes.Params, schemes.Member, error) {
	set := rec.Set(me.Set)
	params, err := paramsOf(rec, len(set))
	if err != nil {
		return schemes.Params{}, schemes.Member{}, err
	}
	nodes := make([]int, len(set))
	for r, m := range set {
		nodes[r] = m.Node
	}
	m := schemes.Member{Rank: me.Rank, Set: schemes.SetInfo{Group: me.Set, Groups: rec.Scheme.Sets, Nodes: nodes},
		Dataset: rec.Dataset, Dir: dir, Files: me.Files}
	return params, m, nil
}

func (p *Protector) protect(ctx context.Context, rec *record.Record, try string, pr *protecting) {
	name := rec.Dataset
	ds := p.o.Store.Get(name)
	if ds == nil {
		return
	}
	unpin := ds.Pin()
	defer unpin()
	// Whatever the outcome, the dataset is settled here: flushes count it
	// and flush jobs waiting for it go on — unless a later protect took
	// over, which settles it.
	defer func() {
		if !pr.wasSuperseded() {
			p.o.Store.Settled(name)
		}
	}()
	params, m, err := p.operation(rec, ds.Dir())
	if err == nil && m.Files == nil {
		// A member that wrote nothing has no list in the record, not even
		// of its directory, whose mode and times its redundancy file
		// records for a rebuild: list the directory, which holds nothing.
		m.Files, err = files.Scan(m.Dir)
	}
	if err != nil {
		p.degrade(name, "cannot protect it under its record: "+err.Error())
		return
	}
	log := p.log.With("dataset", name, "scheme", params.Kind.String())

	if params.Kind == schemes.Single {
		// No redundancy: record the files' metadata so a restart can verify them.
		if _, err := schemes.Encode(ctx, params, m, nil, p.options()...); err != nil {
			log.Warn("record dataset metadata", "err", err)
		}
		return
	}
	coord := m.Set.Nodes[0]
	verdict := p.await(name, try)
	rctx, cancel := context.WithTimeout(ctx, p.o.ConnectTimeout)
	err = p.net.CallRetrying(rctx, coord, "ready", readyMsg{Dataset: name, Rank: m.Rank, Nodes: m.Set.Nodes, Try: try}, nil)
	cancel()
	if ctx.Err() != nil { // closing, or a later protect took over
		p.abandon(name, verdict, verdictClosing)
		return
	}
	v, outcome := p.awaitVerdict(ctx, name, verdict, err != nil)
	switch {
	case outcome == verdictClosing:
		return
	case outcome == verdictNone && err != nil:
		p.degrade(name, fmt.Sprintf("set coordinator node %d unreachable: %v", coord, err))
		p.retake(name)
		return
	case outcome == verdictNone:
		p.degrade(name, fmt.Sprintf("no verdict from set coordinator node %d", coord))
		p.retake(name)
		return
	}
	if v.Attempt == "" {
		p.degrade(name, v.Reason)
		p.retake(name)
		return
	}
	start := time.Now()
	links := p.links(m.Set.Nodes, m.Rank, "enc/"+name+"/"+v.Attempt)
	res, err := schemes.Encode(ctx, params, m, links, p.options()...)
	links.close()
	if err != nil {
		if ctx.Err() == nil {
			p.degrade(name, "encode failed: "+err.Error())
			p.retake(name)
		}
		return
	}
	p.metrics.encoded(params.Kind.String(), res)
	p.mu.Lock()
	delete(p.retakes, name)
	p.mu.Unlock()
	if err := p.o.Store.SetState(name, cache.Protected, ""); err != nil {
		log.Warn("record protected state", "err", err)
		return
	}
	seconds := time.Since(start).Seconds()
	log.Info("dataset protected", "bytes", res.DataBytes, "seconds", seconds, "path", res.Path,
		"rate_mib_s", float64(res.DataBytes)/(1<<20)/max(seconds, 1e-9), "sent", res.Sent, "received", res.Received)
}

// maxRetakes bounds the stock-takings one node asks for after failed
// protects of one dataset; retakePause is the pause before the second,
// doubling after, so that a cause that passes (a cache full for a while,
// a member restarting) has about 15 s to pass.
const (
	maxRetakes  = 5
	retakePause = time.Second
)

// retakeMsg asks node 0 to take stock again: a protect failed here.
type retakeMsg struct {
	Dataset string `json:"dataset"`
}

// Check implements jobnet.Checker.
func (m retakeMsg) Check() error { return layout.CheckDatasetName(m.Dataset) }

// retake asks node 0 for a stock-taking after a protect of dataset name
// failed here (no verdict, a member not ready, an encode cut off): a
// member restarted meanwhile, or the members' tries fell out of step, and
// nothing else would try again while every node is up. The stock-taking
// has every member encode again under one try if all are here, or says
// why not; a few times per dataset at most, further and further apart.
func (p *Protector) retake(name string) {
	p.mu.Lock()
	p.retakes[name]++
	n := p.retakes[name]
	p.mu.Unlock()
	if n > maxRetakes {
		return
	}
	var pause time.Duration
	if n > 1 {
		pause = retakePause << (n - 2)
	}
	p.g.Go(func(ctx context.Context) {
		if sleep.For(ctx, pause) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, p.o.MemberTimeout+p.o.ConnectTimeout)
		defer cancel()
		if err := p.net.Call(ctx, stockTaker, "retake", retakeMsg{Dataset: name}, nil); err != nil {
			p.log.Warn("could not ask node 0 to take stock again", "dataset", name, "err", err)
		}
	})
}

// handleRetake runs a stock-taking for a node whose protect failed.
func (p *Protector) handleRetake(ctx context.Context, from int, m retakeMsg) (any, error) {
	p.log.Info("a protect failed; the job takes stock again", "node", from, "dataset", m.Dataset)
	select {
	case <-p.round():
	case <-ctx.Done():
	}
	return struct{}{}, nil
}

// await registers interest in a dataset's verdict before asking for it, so
// a fast coordinator's answer cannot arrive unheard.
func (p *Protector) await(name, try string) *waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := &waiter{try: try, ch: make(chan verdictMsg, 1)}
	p.verdicts[name] = w
	return w
}

// How the wait for a verdict ended.
type verdictOutcome int

const (
	verdictCame    verdictOutcome = iota
	verdictNone                   // none in time (or the ready call failed)
	verdictClosing                // the Protector closes
)

// awaitVerdict waits on ch for the set coordinator's verdict on dataset
// name; readyFailed means the ready call did not get through, so none is
// waited for (one may have come all the same: the call's answer was lost).
func (p *Protector) awaitVerdict(ctx context.Context, name string, w *waiter, readyFailed bool) (verdictMsg, verdictOutcome) {
	if readyFailed {
		return p.abandon(name, w, verdictNone)
	}
	wait := time.NewTimer(2*p.o.Timeout + p.o.ConnectTimeout)
	defer wait.Stop()
	select {
	case v := <-w.ch:
		return v, verdictCame
	case <-wait.C:
		return p.abandon(name, w, verdictNone)
	case <-ctx.Done():
		p.abandon(name, w, verdictClosing)
		return verdictMsg{}, verdictClosing
	}
}

// abandon gives up waiting on ch for name's verdict, with outcome none;
// but a verdict that arrived meanwhile (handleVerdict delivers it under
// p.mu) is taken.
func (p *Protector) abandon(name string, w *waiter, none verdictOutcome) (verdictMsg, verdictOutcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.verdicts[name] == w {
		delete(p.verdicts, name)
	}
	select {
	case v := <-w.ch:
		return v, verdictCame
	default:
		return verdictMsg{}, none
	}
}

func (p *Protector) degrade(name, reason string) {
	p.log.Warn("dataset degraded: left without redundancy", "dataset", name, "reason", reason)
	p.metrics.degraded.Inc()
	if err := p.o.Store.SetState(name, cache.Degraded, reason); err != nil && !errors.Is(err, cache.ErrNotFound) {
		p.log.Warn("record degraded state", "dataset", name, "err", err)
	}
}

// handleReady runs on the coordinator: it gathers members and, once all
// are ready, sends the verdict.
func (p *Protector) handleReady(ctx context.Context, from int, m readyMsg) (any, error) {
	if len(m.Nodes) == 0 || m.Nodes[0] != p.self || m.Rank < 0 || m.Rank >= len(m.Nodes) {
		return nil, fmt.Errorf("node %d is not the coordinator of the set %v of %s", p.self, m.Nodes, m.Dataset)
	}
	key := roundKey{m.Dataset, m.Try}
	p.mu.Lock()
	r := p.rounds[key]
	if r == nil {
		r = &round{nodes: m.Nodes, ready: map[int]bool{}}
		r.timer = time.AfterFunc(p.o.Timeout, func() { p.g.Go(func(context.Context) { p.timeout(key, r) }) })
		p.rounds[key] = r
	}
	r.ready[m.Rank] = true
	all := len(r.ready) == len(r.nodes)
	if all {
		r.timer.Stop()
		delete(p.rounds, key)
	}
	p.mu.Unlock()
	if all {
		v := verdictMsg{Dataset: m.Dataset, Try: m.Try, Attempt: jobnet.NewToken()}
		p.tell("verdict", v, r.nodes, "could not deliver redundancy verdict", m.Dataset)
	}
	return struct{}{}, nil
}

// timeout gives up on members that did not report ready in time.
func (p *Protector) timeout(key roundKey, r *round) {
	p.mu.Lock()
	if p.rounds[key] != r {
		p.mu.Unlock()
		return // every member was ready after all
	}
	delete(p.rounds, key)
	p.mu.Unlock()
	name := key.dataset
	var missing []string
	var ready []int
	for rank, node := range r.nodes {
		if r.ready[rank] {
			ready = append(ready, node)
		} else {
			missing = append(missing, strconv.Itoa(node))
		}
	}
	reason := fmt.Sprintf("node %s not ready within %v", strings.Join(missing, ", "), p.o.Timeout)
	p.tell("verdict", verdictMsg{Dataset: name, Try: key.try, Reason: reason}, ready, "could not deliver redundancy verdict", name)
}

// handleVerdict runs on every member: it wakes the dataset's protect.
func (p *Protector) handleVerdict(ctx context.Context, from int, v verdictMsg) (any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.verdicts[v.Dataset]
	if w == nil || w.try != v.Try {
		return nil, fmt.Errorf("node %d is not waiting for a verdict on %s (try %q)", p.self, v.Dataset, v.Try)
	}
	delete(p.verdicts, v.Dataset)
	w.ch <- v // buffered, never blocks; under p.mu so abandon sees it
	return struct{}{}, nil
}
