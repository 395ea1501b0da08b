package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/schemes"
)

// Protecting a dataset: once it is complete on a node, that node reports
// ready to its set's coordinator (the member of rank 0). When every member
// is ready the coordinator tells them all to encode, under a fresh attempt
// token that names the streams; if one is not ready within
// redundancy.timeout it tells the ready ones the dataset stays unprotected
// (degraded) and why. One verdict for everyone means members never disagree
// about whether an encode happens.

// readyMsg tells the coordinator a member has a dataset complete.
type readyMsg struct {
	Dataset string `json:"dataset"`
	Rank    int    `json:"rank"`
}

// verdictMsg is the coordinator's answer to every member.
type verdictMsg struct {
	Dataset string `json:"dataset"`
	Attempt string `json:"attempt,omitempty"` // set when the members encode
	Reason  string `json:"reason,omitempty"`  // why not, when Attempt is empty
}

// protector holds the protocol state of this node.
type protector struct {
	d      *Daemon
	params schemes.Params
	member schemes.Member // Rank and Set filled; Dataset and Dir per dataset
	bufs   *schemes.Buffers

	mu       sync.Mutex
	rounds   map[string]*round          // coordinator: datasets being gathered
	verdicts map[string]chan verdictMsg // member: datasets waiting for a verdict
}

// round is the coordinator's view of one dataset's readiness.
type round struct {
	ready map[int]bool
	timer *time.Timer
}

func (d *Daemon) newProtector() (*protector, error) {
	kind, err := schemes.ParseKind(d.cluster.Scheme.Kind)
	if err != nil {
		return nil, err
	}
	set, rank := d.cluster.Layout.Find(d.node)
	p := &protector{
		d: d,
		params: schemes.Params{
			Kind: kind, Size: len(set.Members), Replicas: d.cluster.Scheme.Replicas,
			Parity: d.cluster.Scheme.Parity, PieceSize: int(d.cfg.Redundancy.PieceSize),
		},
		member: schemes.Member{
			Rank: rank,
			Set:  schemes.SetInfo{Group: set.ID, Groups: len(d.cluster.Layout.Sets), Nodes: slices.Clone(set.Members)},
		},
		bufs:     schemes.NewBuffers(),
		rounds:   map[string]*round{},
		verdicts: map[string]chan verdictMsg{},
	}
	if err := p.params.Validate(); err != nil {
		return nil, err
	}
	d.rpc.handle("ready", p.handleReady)
	d.rpc.handle("verdict", p.handleVerdict)
	return p, nil
}

// options are what every encode and rebuild on this node shares: the
// daemon's piece buffers, and the cache's spare redundancy files to write
// over.
func (p *protector) options(more ...schemes.Option) []schemes.Option {
	return append([]schemes.Option{schemes.WithBuffers(p.bufs), schemes.WithSpare(p.d.store.TakeSpare)}, more...)
}

// coordinator is the node that gathers readiness for this node's set.
func (p *protector) coordinator() int { return p.member.Set.Nodes[0] }

// protect applies redundancy to a dataset that just completed here. It runs
// in its own goroutine and always ends with the dataset protected, degraded
// with a reason, or (SINGLE) simply complete with its metadata recorded.
func (p *protector) protect(info cache.Info) {
	ds := p.d.store.Get(info.Name)
	if ds == nil {
		return
	}
	unpin := ds.Pin()
	defer unpin()
	// Whatever the outcome, the dataset is settled here: flushes count it
	// (node 0) and flush jobs waiting for it go on.
	defer p.d.flusher.settled(info.Name)
	m := p.member
	m.Dataset, m.Dir = info.Name, ds.Dir()
	log := p.d.log.With("dataset", info.Name, "scheme", p.params.Kind.String())

	if p.params.Kind == schemes.Single {
		// No redundancy: record the files' metadata so a restart can verify them.
		if _, err := schemes.Encode(p.d.ctx, p.params, m, nil, p.options()...); err != nil {
			log.Warn("record dataset metadata", "err", err)
		}
		return
	}
	verdict := p.await(info.Name)
	if err := p.d.rpc.call(p.d.ctx, p.coordinator(), "ready", readyMsg{Dataset: info.Name, Rank: m.Rank}, nil); err != nil {
		p.degrade(info.Name, fmt.Sprintf("set coordinator node %d unreachable: %v", p.coordinator(), err))
		return
	}
	var v verdictMsg
	select {
	case v = <-verdict:
	case <-time.After(2*p.d.cfg.Redundancy.Timeout.Duration + p.d.broadcastTimeout()):
		p.forget(info.Name)
		p.degrade(info.Name, fmt.Sprintf("no verdict from set coordinator node %d", p.coordinator()))
		return
	case <-p.d.ctx.Done():
		return
	}
	if v.Attempt == "" {
		p.degrade(info.Name, v.Reason)
		return
	}
	start := time.Now()
	links := &streamLinks{d: p.d, nodes: m.Set.Nodes, prefix: "enc/" + info.Name + "/" + v.Attempt}
	res, err := schemes.Encode(p.d.ctx, p.params, m, links, p.options()...)
	links.close()
	if err != nil {
		p.degrade(info.Name, "encode failed: "+err.Error())
		return
	}
	p.d.metrics.encoded(p.params.Kind.String(), res)
	if err := p.d.store.SetState(info.Name, cache.Protected, ""); err != nil {
		log.Warn("record protected state", "err", err)
		return
	}
	seconds := time.Since(start).Seconds()
	log.Info("dataset protected", "bytes", res.DataBytes, "seconds", seconds,
		"rate_mib_s", float64(res.DataBytes)/(1<<20)/max(seconds, 1e-9), "sent", res.Sent, "received", res.Received)
}

// await registers interest in a dataset's verdict before asking for it, so
// a fast coordinator's answer cannot arrive unheard.
func (p *protector) await(name string) <-chan verdictMsg {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan verdictMsg, 1)
	p.verdicts[name] = ch
	return ch
}

func (p *protector) forget(name string) {
	p.mu.Lock()
	delete(p.verdicts, name)
	p.mu.Unlock()
}

func (p *protector) degrade(name, reason string) {
	p.d.log.Warn("dataset degraded: left without redundancy", "dataset", name, "reason", reason)
	p.d.metrics.degraded.Inc()
	if err := p.d.store.SetState(name, cache.Degraded, reason); err != nil && !errors.Is(err, cache.ErrNotFound) {
		p.d.log.Warn("record degraded state", "dataset", name, "err", err)
	}
}

// handleReady runs on the coordinator: it gathers members and, once all
// are ready, sends the verdict.
func (p *protector) handleReady(ctx context.Context, from int, req json.RawMessage) (any, error) {
	m, err := decode[readyMsg](req)
	if err != nil {
		return nil, err
	}
	if p.coordinator() != p.d.node {
		return nil, fmt.Errorf("node %d is not the coordinator of its set", p.d.node)
	}
	p.mu.Lock()
	r := p.rounds[m.Dataset]
	if r == nil {
		r = &round{ready: map[int]bool{}}
		r.timer = time.AfterFunc(p.d.cfg.Redundancy.Timeout.Duration, func() { p.timeout(m.Dataset) })
		p.rounds[m.Dataset] = r
	}
	r.ready[m.Rank] = true
	all := len(r.ready) == p.params.Size
	if all {
		r.timer.Stop()
		delete(p.rounds, m.Dataset)
	}
	p.mu.Unlock()
	if all {
		go p.sendVerdict(verdictMsg{Dataset: m.Dataset, Attempt: token()}, p.member.Set.Nodes)
	}
	return struct{}{}, nil
}

// timeout gives up on members that did not report ready in time.
func (p *protector) timeout(name string) {
	p.mu.Lock()
	r := p.rounds[name]
	delete(p.rounds, name)
	p.mu.Unlock()
	if r == nil {
		return
	}
	var missing []string
	var ready []int
	for rank, node := range p.member.Set.Nodes {
		if r.ready[rank] {
			ready = append(ready, node)
		} else {
			missing = append(missing, itoa(node))
		}
	}
	reason := fmt.Sprintf("node %s not ready within %v", strings.Join(missing, ", "), p.d.cfg.Redundancy.Timeout.Duration)
	p.sendVerdict(verdictMsg{Dataset: name, Reason: reason}, ready)
}

func (p *protector) sendVerdict(v verdictMsg, nodes []int) {
	ctx, cancel := context.WithTimeout(p.d.ctx, p.d.broadcastTimeout())
	defer cancel()
	for n, err := range p.d.rpc.callAll(ctx, nodes, "verdict", v) {
		p.d.log.Warn("could not deliver redundancy verdict", "dataset", v.Dataset, "to", n, "err", err)
	}
}

// handleVerdict runs on every member: it wakes the dataset's protect.
func (p *protector) handleVerdict(ctx context.Context, from int, req json.RawMessage) (any, error) {
	v, err := decode[verdictMsg](req)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	ch := p.verdicts[v.Dataset]
	delete(p.verdicts, v.Dataset)
	p.mu.Unlock()
	if ch == nil {
		return nil, fmt.Errorf("node %d is not waiting for a verdict on %s", p.d.node, v.Dataset)
	}
	ch <- v
	return struct{}{}, nil
}

// token returns a fresh attempt token.
func token() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
