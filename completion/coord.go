package completion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/record"
)

// Node 0's side: the ledger's entries (begin, join) and completion rounds.

// errNotCoordinator answers requests only node 0 serves.
func (c *Completer) errNotCoordinator(kind string) error {
	return fmt.Errorf("node %d does not coordinate completions (node 0 does); %s refused", c.self, kind)
}

// raiseSeqLocked makes every number handed out from now on at least next
// (a node holds a larger one, or the prefix's index does) and returns
// whether that changed the ledger. A round that took its number before
// takes another (recordLocked). c.mu must be held.
func (c *Completer) raiseSeqLocked(next uint64) bool {
	if next <= c.ledger.NextSeq {
		return false
	}
	c.ledger.NextSeq, c.seqFloor = next, next
	return true
}

// persistLocked writes the ledger. c.mu must be held.
func (c *Completer) persistLocked() error {
	if err := c.ledger.save(c.o.ControlDir); err != nil {
		return fmt.Errorf("node 0 could not keep its ledger: %w", err)
	}
	return nil
}

func (c *Completer) handleBegin(ctx context.Context, from int, m beginMsg) (any, error) {
	if c.self != coordinator {
		return nil, c.errNotCoordinator("begin")
	}
	c.mu.Lock()
	if why, ok := c.ended[m.Dataset]; ok {
		if why == "" {
			c.mu.Unlock()
			return nil, fmt.Errorf("dataset %s is complete already: %w", m.Dataset, cache.ErrReadOnly)
		}
		// A failed dataset's name may be written again from scratch.
		c.forgetEndLocked(m.Dataset)
	}
	_, known := c.ledger.Begun[m.Dataset]
	c.ledger.begin(m.Dataset, m.ID, m.Run)
	err := c.persistLocked()
	if err != nil || known {
		c.mu.Unlock()
		return struct{}{}, err
	}
	// Every node asks, so only a new dataset copies the runs: the ones
	// node 0 knew when it began.
	runs := maps.Clone(c.runs)
	c.mu.Unlock()
	// A new dataset: every other node shows its directory before the
	// starter goes on, so its other ranks find it.
	c.announce(ctx, from, m, runs)
	return struct{}{}, nil
}

func (c *Completer) handleRename(ctx context.Context, from int, m renameMsg) (any, error) {
	if c.self != coordinator {
		return nil, c.errNotCoordinator("rename")
	}
	c.mu.Lock()
	if _, taken := c.ledger.Begun[m.To]; taken {
		c.mu.Unlock()
		return nil, fmt.Errorf("rename %s to %s: %w", m.From, m.To, cache.ErrExists)
	}
	if b := c.ledger.Begun[m.From]; b != nil {
		delete(c.ledger.Begun, m.From)
		c.ledger.Begun[m.To] = b
	}
	err := c.persistLocked()
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
	defer cancel()
	for n, r := range c.net.Fanout(ctx, c.others(from), "renamed", m) {
		if r.Err != nil {
			c.log.Warn("could not rename a node's copy of a dataset", "dataset", m.From, "to", m.To, "node", n, "err", r.Err)
		}
	}
	return struct{}{}, nil
}

// others returns every node index but skip.
func (c *Completer) others(skip int) []int {
	var out []int
	for _, n := range c.all() {
		if n != skip {
			out = append(out, n)
		}
	}
	return out
}

// announce tells every node but the starter that a dataset began, and
// notes the run that holds it on each, each within ConnectTimeout. The
// starter waits for the nodes that answer, but at most half of that: a
// node that is down does not hold up the application's mkdir (which fails
// once the starter's own wait for node 0 ends); it is told in the
// background, or creates the dataset when the application writes there.
// The nodes not told by then, and those that could not be told at all,
// are noted in the ledger with the daemon run node 0 knew for each
// (runs), which alone can vouch for its share.
func (c *Completer) announce(ctx context.Context, starter int, m beginMsg, runs map[int]string) {
	told := make(chan struct{})
	answered := map[int]bool{starter: true}
	keep := func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
		defer cancel()
		// Each run is noted as its node answers: a round may judge the
		// shares before a node that is down was waited out.
		c.net.FanoutEach(ctx, c.others(starter), "began", m, func(n int, r jobnet.Reply) {
			var rep beganReply
			if err := r.Decode(&rep); err != nil {
				c.log.Warn("could not tell a node a dataset began", "dataset", m.Dataset, "to", n, "err", err)
				return
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			answered[n] = true
			c.ledger.begin(m.Dataset, rep.ID, rep.Run)
		})
		c.mu.Lock()
		// A node that failed the call (killed as it was told) is as
		// unreached as one that did not answer in time; one that joined
		// again meanwhile, with another run, can never vouch for its
		// share, and the dataset fails now, as it would at that join.
		doomed := map[string]failMsg{}
		for n := range c.o.Nodes {
			if answered[n] {
				continue
			}
			c.ledger.unreached(m.Dataset, n, runs[n])
			if cur := c.runs[n]; cur != runs[n] && c.ledger.Begun[m.Dataset] != nil && !c.rounds[m.Dataset] {
				doomed[m.Dataset] = failMsg{Dataset: m.Dataset, Kind: m.Kind, Root: m.Root,
					Reason: fmt.Sprintf("node %d: it could not be told the dataset began, and its daemon restarted since", n)}
				c.ledger.done(m.Dataset)
				c.endLocked(m.Dataset, doomed[m.Dataset].Reason)
			}
		}
		if err := c.persistLocked(); err != nil {
			c.log.Error("keep the ledger", "err", err)
		}
		c.mu.Unlock()
		c.failDoomed(doomed)
		close(told)
	}
	if !c.g.Go(keep) {
		keep(ctx)
	}
	wait := time.NewTimer(c.o.ConnectTimeout / 2)
	defer wait.Stop()
	select {
	case <-told:
	case <-wait.C:
		c.log.Info("a dataset starts before every node heard of it; the others hear in the background", "dataset", m.Dataset)
		c.mu.Lock()
		for n := range c.o.Nodes {
			if !answered[n] {
				c.ledger.unreached(m.Dataset, n, runs[n])
			}
		}
		if err := c.persistLocked(); err != nil {
			c.log.Error("keep the ledger", "err", err)
		}
		c.mu.Unlock()
	case <-ctx.Done():
	}
}

func (c *Completer) handleJoin(ctx context.Context, from int, m joinMsg) (any, error) {
	if c.self != coordinator {
		return nil, c.errNotCoordinator("join")
	}
	c.joined(ctx, from, m, true)
	return struct{}{}, nil
}

// recall asks every other node for its join, once node 0 joined itself at
// start, within ConnectTimeout, and takes each answer as a join. Node 0's
// ledger may be older than the job (a restart) or empty (wiped): the
// nodes that kept running hold datasets complete but unrecorded, whose
// rounds node 0's restart cut off, and newer sequence numbers than its
// ledger's. A node that does not answer joins when it starts. Rounds wait
// until the recall is over before they number a record.
func (c *Completer) recall(ctx context.Context) {
	defer c.recalledOnce.Do(func() { close(c.recalled) })
	ctx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
	defer cancel()
	for n, r := range c.net.Fanout(ctx, c.others(c.self), "recall", recallMsg{}) {
		var m joinMsg
		err := r.Decode(&m)
		if err == nil {
			err = m.Check()
		}
		if err != nil {
			c.log.Info("a node did not say what it holds; it will when it joins", "node", n, "err", err)
			continue
		}
		// Not waiting for the rounds it starts: they wait for the recall
		// to be over before they number a record.
		c.joined(ctx, n, m, false)
	}
}

// awaitRecall waits until node 0's recall is over, or ctx ends.
func (c *Completer) awaitRecall(ctx context.Context) error {
	select {
	case <-c.recalled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// joined takes a node's join: its identity, its newest sequence number,
// and the datasets complete there but never recorded, which are proven
// now (with wait, before it returns).
func (c *Completer) joined(ctx context.Context, from int, m joinMsg, wait bool) {
	c.mu.Lock()
	settled := c.settleAgreedLocked()
	doomed := c.doomedLocked(from, m)
	c.runs[from], c.ids[from] = m.Run, m.ID
	changed := c.ledger.heard(m.ID) || len(doomed) > 0 || settled
	if c.raiseSeqLocked(m.MaxSeq + 1) {
		changed = true
	}
	if changed {
		// A ledger node 0 cannot write (its control directory full) does
		// not keep the node out: if node 0 restarts before it can, it
		// hears of the node later, so it fails the node's empty shares
		// of datasets begun before, never completes one wrongly; and
		// nodes report their newest sequence at every join.
		if err := c.persistLocked(); err != nil {
			c.log.Error("node joined, but node 0 could not keep it in its ledger", "from", from, "err", err)
		}
	}
	c.mu.Unlock()
	c.log.Info("node joined", "from", from, "id", m.ID, "run", m.Run, "pending", len(m.Pending), "writing", len(m.Writing))
	c.failDoomed(doomed)
	var rounds []<-chan struct{}
	for _, p := range m.Pending {
		// Again, even if its round ended recorded: the node missed the
		// record (killed before it arrived), and gets it now.
		m := completeMsg{Dataset: p.Dataset, Kind: p.Kind, Root: p.Root, Reason: "complete on node " + itoa(from) + " before a restart", From: from}
		if done := c.startRound(m, true); done != nil {
			rounds = append(rounds, done)
		}
	}
	// The node's datasets are settled before its join returns: the
	// stock-taking its start asks for next finds them recorded there.
	for _, done := range rounds {
		if !wait {
			break
		}
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}

// doomedLocked returns the datasets being written that node from's join
// m shows can never complete, each with why: node from's daemon
// restarted, or it was wiped, since it began them (its copy is lost: its
// restore failed it, or it is gone with the cache) or since it could not
// be told they began (it cannot vouch for what it held meanwhile), or a
// node writes one that node 0's ledger does not know (node 0 restarted
// with an empty cache): the ledger's rules (judge) would fail them. Failing them now settles them at once, rather than leaving them
// writing until a completion rule fires, which may never come (the ranks
// that would write the marker are gone). Datasets complete on node from
// are proven by their rounds instead; a round already under way decides
// for itself. c.mu must be held.
func (c *Completer) doomedLocked(from int, m joinMsg) map[string]failMsg {
	out := map[string]failMsg{}
	pending := map[string]bool{}
	for _, p := range m.Pending {
		pending[p.Dataset] = true
	}
	prevID := c.ids[from]
	wiped := prevID != "" && prevID != m.ID
	for name, b := range c.ledger.Begun {
		if pending[name] || c.rounds[name] {
			continue
		}
		if from == c.self && (c.inherited[name] || c.failedHere(name) != "") {
			// Node 0's own copy, failed by its restore or never made
			// (killed between agreeing the start and starting it here),
			// even where its run never made it into the ledger (killed
			// before it kept what it heard).
			out[name] = failMsg{Dataset: name, Reason: "node 0 lost its copy: its daemon restarted while it was being written"}
			continue
		}
		if run, ok := b.Unreached[from]; ok && run != m.Run {
			out[name] = failMsg{Dataset: name, Reason: fmt.Sprintf("node %d: it could not be told the dataset began, and its daemon restarted since", from)}
			continue
		}
		for _, by := range b.By {
			switch {
			case by[0] == m.ID && by[1] != m.Run:
				out[name] = failMsg{Dataset: name, Reason: fmt.Sprintf("node %d lost its copy: its daemon restarted while it was being written", from)}
			case wiped && by[0] == prevID:
				out[name] = failMsg{Dataset: name, Reason: fmt.Sprintf("node %d lost its copy: it restarted with an empty cache (wiped or replaced) while it was being written", from)}
			}
		}
	}
	for _, w := range m.Writing {
		if _, ok := c.ledger.Begun[w.Dataset]; !ok && !c.rounds[w.Dataset] {
			out[w.Dataset] = failMsg{Dataset: w.Dataset, Reason: "node 0 lost its copy: it restarted with an empty cache (wiped or replaced) while it was being written, and has no record of when it began"}
		}
	}
	for _, w := range m.Writing {
		if f, ok := out[w.Dataset]; ok {
			f.Kind, f.Root = w.Kind, w.Root
			out[w.Dataset] = f
		}
	}
	for name, f := range out {
		c.ledger.done(name)
		c.endLocked(name, f.Reason)
	}
	return out
}

// settleAgreedLocked forgets the start of every dataset whose record node
// 0 keeps with its own copy, and returns whether there was one: a run of
// node 0 killed after it kept the record (keepHere) and before its ledger
// forgot the start had agreed it, so no share of it is judged again (a
// node's restart since would fail it), and the round its nodes ask for
// sends the record on. c.mu must be held.
func (c *Completer) settleAgreedLocked() bool {
	settled := false
	for name := range c.ledger.Begun {
		if c.agreedHere(name) {
			c.ledger.done(name)
			delete(c.inherited, name)
			settled = true
		}
	}
	return settled
}

// agreedHere reports whether this node's copy of dataset name holds the
// job's record of it.
func (c *Completer) agreedHere(name string) bool {
	ds := c.o.Store.Get(name)
	if ds == nil || !ds.Info().State.Completed() {
		return false
	}
	rec, err := record.Load(ds.Dir())
	return err == nil && rec.Dataset == name
}

// failDoomed fails every dataset in doomed on every node, in the
// background.
func (c *Completer) failDoomed(doomed map[string]failMsg) {
	for name, f := range doomed {
		if f.Kind == "" {
			f.Kind, f.Root = string(cache.KindDir), name
			if ds := c.o.Store.Get(name); ds != nil {
				r := ds.Route()
				f.Kind, f.Root = string(r.Kind), r.Root
			}
		}
		f.Reason = "incomplete: " + f.Reason
		c.metrics.rounds.WithLabelValues("failed").Inc()
		c.log.Error("dataset failed: a node restarted while it was being written", "dataset", name, "reason", f.Reason)
		c.g.Go(func(ctx context.Context) { c.tell(ctx, "fail", f, c.log.With("dataset", name)) })
	}
}

func (c *Completer) handleComplete(ctx context.Context, from int, m completeMsg) (any, error) {
	if c.self != coordinator {
		return nil, c.errNotCoordinator("complete")
	}
	c.mu.Lock()
	_, begun := c.ledger.Begun[m.Dataset]
	why, ended := c.ended[m.Dataset]
	c.mu.Unlock()
	if ended && why != "" && !begun {
		return nil, fmt.Errorf("dataset %s failed: %s", m.Dataset, why)
	}
	if !begun && !ended && c.o.Store.Get(m.Dataset) == nil {
		if lost := c.failedHere(m.Dataset); lost != "" {
			return nil, fmt.Errorf("dataset %s failed: %s", m.Dataset, lost)
		}
	}
	// A name nobody knows is refused (scrfs complete of a typo); but a
	// node that holds the dataset (m.Kind is set) gets a round even when
	// node 0 has no record of it — node 0 lost its ledger (replaced,
	// wiped) — so the dataset ends failed everywhere, with that reason,
	// rather than waiting for ever.
	if !begun && !ended && c.o.Store.Get(m.Dataset) == nil && m.Kind == "" {
		return nil, fmt.Errorf("no node began a dataset %s: %w", m.Dataset, cache.ErrNotFound)
	}
	if m.Kind == "" {
		// scrfs complete on a node that holds none of it: node 0's copy,
		// or the default, tells where it sits.
		m.Kind, m.Root = string(cache.KindDir), m.Dataset
		if ds := c.o.Store.Get(m.Dataset); ds != nil {
			r := ds.Route()
			m.Kind, m.Root = string(r.Kind), r.Root
		}
	}
	c.startRound(m, false)
	return struct{}{}, nil
}

// startRound proves dataset m.Dataset complete in the background, unless a
// round of it runs, or (unless again) ended recorded already. It returns a
// channel closed when the round is over, nil if none started.
func (c *Completer) startRound(m completeMsg, again bool) <-chan struct{} {
	c.mu.Lock()
	why, ended := c.ended[m.Dataset]
	if c.rounds[m.Dataset] || (ended && why == "" && !again) {
		c.mu.Unlock()
		return nil
	}
	c.rounds[m.Dataset] = true
	if !m.fetched {
		// The record's number and time are the round's place in line:
		// of two rounds under way, the dataset node 0 began proving
		// first is the older, whichever round ends first.
		m.seq, m.completed = c.ledger.NextSeq, time.Now().UTC()
		c.ledger.NextSeq++
	}
	c.mu.Unlock()
	done := make(chan struct{})
	if !c.g.Go(func(ctx context.Context) {
		defer close(done)
		c.round(ctx, m)
	}) {
		c.mu.Lock()
		delete(c.rounds, m.Dataset)
		c.mu.Unlock()
		return nil
	}
	return done
}

// round asks every node for its share, judges them, and sends every node
// the record or the failure.
func (c *Completer) round(ctx context.Context, m completeMsg) {
	start := time.Now()
	log := c.log.With("dataset", m.Dataset)
	defer func() {
		c.mu.Lock()
		delete(c.rounds, m.Dataset)
		c.mu.Unlock()
	}()
	if c.awaitRecall(ctx) != nil {
		return // closing: proven after the restart
	}
	shares := c.collect(ctx, m)
	if ctx.Err() != nil {
		return // closing: proven after the restart
	}
	if rec := recordedBefore(m, shares); rec != nil {
		// The job agreed this dataset's record already (this round was
		// asked for again: a node that missed the record rejoined, or node
		// 0 restarted and forgot the round's end). The record stands; it
		// is sent to every node again, never judged anew.
		c.mu.Lock()
		c.ledger.done(m.Dataset)
		c.endLocked(m.Dataset, "")
		err := c.persistLocked()
		c.mu.Unlock()
		if err != nil {
			log.Error("completion not recorded", "err", err)
		}
		log.Info("dataset recorded before; its record sent again", "seq", rec.Seq)
		c.tell(ctx, "record", recordMsg{Record: rec}, log)
		return
	}
	// Files several nodes wrote are compared before the ledger is asked:
	// the comparison calls the nodes.
	clash := ""
	if !m.fetched && allShared(shares) {
		clash = c.compareShared(ctx, m.Dataset, shares)
	}
	c.mu.Lock()
	var why []string
	for n, s := range shares {
		switch {
		case s.err != nil:
			why = append(why, fmt.Sprintf("node %d did not report its share: %v", n, s.err))
		case m.fetched && s.rep.Lost != "":
			why = append(why, fmt.Sprintf("node %d: %s", n, s.rep.Lost))
		case m.fetched:
		default:
			if w := c.ledger.judge(m.Dataset, n, &s.rep); w != "" {
				why = append(why, fmt.Sprintf("node %d: %s", n, w))
			}
		}
	}
	var rec *record.Record
	reason := "incomplete: " + strings.Join(why, "; ")
	switch {
	case len(why) == 0 && clash != "":
		reason = "a file several nodes wrote is not one: " + clash
	case len(why) == 0:
		rec = c.recordLocked(m, shares)
		c.mu.Unlock() // the store it tells reports events that come back here
		c.keepHere(ctx, rec, log)
		if testHook != nil {
			testHook(ctx, "kept")
		}
		if ctx.Err() != nil {
			return // closing: agreed all the same (settleAgreedLocked)
		}
		c.mu.Lock()
	}
	c.ledger.done(m.Dataset)
	if rec == nil {
		c.endLocked(m.Dataset, reason)
	} else {
		c.endLocked(m.Dataset, "")
	}
	err := c.persistLocked()
	c.mu.Unlock()
	if err != nil {
		log.Error("completion not recorded", "err", err)
		return
	}
	c.metrics.seconds.Observe(time.Since(start).Seconds())
	if rec == nil {
		c.metrics.rounds.WithLabelValues("failed").Inc()
		log.Error("dataset failed", "reason", reason)
		c.tell(ctx, "fail", failMsg{Dataset: m.Dataset, Kind: m.Kind, Root: m.Root, Reason: reason}, log)
		return
	}
	c.metrics.rounds.WithLabelValues("recorded").Inc()
	log.Info("dataset complete job-wide", "seq", rec.Seq, "members", len(rec.Members), "reason", m.Reason,
		"seconds", time.Since(start).Seconds())
	if testHook != nil {
		testHook(ctx, "forgotten")
	}
	if ctx.Err() != nil {
		return // closing: node 0's copy holds the record, and sends it on after the restart
	}
	if refused := c.tell(ctx, "record", recordMsg{Record: rec}, log); len(refused) > 0 {
		c.unrecord(ctx, m, rec, refused, log)
	}
}

// unrecord fails a dataset whose record nodes refused to keep (their
// cache full, their share gone since): it cannot be protected without
// every share, and a dataset must never be complete or flushed somewhere
// while its record is missing elsewhere. Nodes that keep it recorded fail
// it too (failMsg.Seq). A node that could not be reached learns the record
// when it joins again, as ever.
func (c *Completer) unrecord(ctx context.Context, m completeMsg, rec *record.Record, refused map[int]error, log *slog.Logger) {
	var why []string
	for _, n := range slices.Sorted(maps.Keys(refused)) {
		msg := refused[n].Error()
		var re *jobnet.RemoteError
		if errors.As(refused[n], &re) {
			msg = re.Msg // it names the node
		}
		why = append(why, msg)
	}
	reason := "incomplete: " + strings.Join(why, "; ")
	c.mu.Lock()
	c.endLocked(m.Dataset, reason)
	if err := c.persistLocked(); err != nil {
		log.Error("keep the ledger", "err", err)
	}
	c.mu.Unlock()
	c.metrics.rounds.WithLabelValues("failed").Inc()
	log.Error("dataset failed: not every node could keep its record", "seq", rec.Seq, "reason", reason)
	c.tell(ctx, "fail", failMsg{Dataset: m.Dataset, Kind: m.Kind, Root: m.Root, Reason: reason, Seq: rec.Seq}, log)
}

// keepHere keeps rec with node 0's own copy of the dataset before its
// ledger forgets when the dataset began. Node 0 killed before the record
// reaches the nodes then finds it in its copy at its restart and sends it
// on (recordedBefore); the ledger alone could no longer prove the
// checkpoint, and a complete checkpoint would fail. Telling node 0 again
// with the rest is a no-op.
func (c *Completer) keepHere(ctx context.Context, rec *record.Record, log *slog.Logger) {
	if _, err := c.handleRecord(ctx, c.self, recordMsg{Record: rec}); err != nil {
		log.Warn("node 0 could not keep the record before telling the nodes", "err", err)
	}
}

// testHook, when set, is called at two points of a round that records
// its dataset, for a test to stop node 0 there: "kept", once node 0 kept
// the record, before its ledger forgets when the dataset began;
// "forgotten", after that, before it tells the nodes.
var testHook func(ctx context.Context, point string)

// recordedBefore returns the newest record of m's dataset a node answered
// with, or nil. A fetched dataset is recorded anew for this job.
func recordedBefore(m completeMsg, shares []share) *record.Record {
	if m.fetched {
		return nil
	}
	var newest *record.Record
	for _, s := range shares {
		r := s.rep.Record
		if s.err != nil || r == nil || r.Dataset != m.Dataset || r.Check() != nil {
			continue
		}
		if newest == nil || r.Newer(newest) {
			newest = r
		}
	}
	return newest
}

// allShared reports whether every node answered with its share.
func allShared(shares []share) bool {
	for _, s := range shares {
		if s.err != nil || s.rep.Lost != "" {
			return false
		}
	}
	return true
}

// share is one node's answer to a round.
type share struct {
	rep shareReply
	err error
}

// collect asks every node for its share at once, within Timeout.
func (c *Completer) collect(ctx context.Context, m completeMsg) []share {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	req := shareReq{Dataset: m.Dataset, Kind: m.Kind, Root: m.Root, Reason: m.Reason}
	if m.From != c.self {
		req.Reason = "node " + itoa(m.From) + ": " + m.Reason
	}
	out := make([]share, c.o.Nodes)
	replies := c.net.Fanout(ctx, c.all(), "share", req)
	for n := range out {
		out[n].err = replies[n].Decode(&out[n].rep)
	}
	return out
}

// recordLocked makes the record of a proven dataset. c.mu must be held.
func (c *Completer) recordLocked(m completeMsg, shares []share) *record.Record {
	rec := &record.Record{
		Version: record.Version, Dataset: m.Dataset, Kind: m.Kind, Root: m.Root,
		Seq: m.seq, Completed: m.completed, Scheme: c.o.Scheme,
	}
	switch {
	case m.fetched && m.seq > 0:
		// The same checkpoint as flushed, in this job's layout: a revision,
		// and a new encoding (Record.Fetched).
		rec.Rev, rec.Fetched = 1, time.Now().UTC()
		c.ledger.NextSeq = max(c.ledger.NextSeq, m.seq+1)
	case m.fetched || m.seq < c.seqFloor:
		// No number yet, or one taken before a node said it holds a
		// larger one: the next.
		rec.Seq, rec.Completed = c.ledger.NextSeq, time.Now().UTC()
		c.ledger.NextSeq++
	}
	for n, s := range shares {
		sr := c.setOf[n]
		rec.Members = append(rec.Members, record.Member{Node: n, ID: s.rep.ID, Set: sr[0], Rank: sr[1],
			Empty: s.rep.Empty, Files: s.rep.Files})
	}
	return rec
}

// maxEnded bounds the outcomes node 0 remembers to refuse late begins and
// repeated rounds.
const maxEnded = 1024

// forgetEndLocked forgets how dataset name's round ended: it is written
// again. c.mu must be held.
func (c *Completer) forgetEndLocked(name string) {
	delete(c.ended, name)
	c.endedOrder = slices.DeleteFunc(c.endedOrder, func(n string) bool { return n == name })
}

// endLocked remembers how dataset name's round ended ("" = recorded),
// forgetting the oldest outcome beyond maxEnded. c.mu must be held.
func (c *Completer) endLocked(name, why string) {
	if _, ok := c.ended[name]; !ok {
		c.endedOrder = append(c.endedOrder, name)
	}
	c.ended[name] = why
	for len(c.endedOrder) > maxEnded {
		delete(c.ended, c.endedOrder[0])
		c.endedOrder = c.endedOrder[1:]
	}
}

// tell sends a round's outcome to every node, each tried for at most
// ConnectTimeout; a node that missed it learns when it joins again. It
// returns the errors of the nodes that were reached and refused it.
func (c *Completer) tell(ctx context.Context, kind string, msg any, log *slog.Logger) map[int]error {
	ctx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
	defer cancel()
	refused := map[int]error{}
	for n, r := range c.net.Fanout(ctx, c.all(), kind, msg) {
		if r.Err != nil {
			log.Warn("could not tell a node how a completion ended", "to", n, "outcome", kind, "err", r.Err)
			if jobnet.IsRemote(r.Err) {
				refused[n] = r.Err
			}
		}
	}
	return refused
}

func itoa(i int) string { return fmt.Sprint(i) }
