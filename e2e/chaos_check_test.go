package e2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/internal/testutil"
)

// The invariants, checked after every recovery once every node is up and
// every dataset settled. The statuses seen meanwhile are checked too: a
// checkpoint a kill interrupted must never show a record, protection or a
// flush, even for a moment.

// chaosPhase is what the job is doing, from every answering node's status.
type chaosPhase struct {
	completing, encoding, flushing, rebuilding bool
	// quiet: every node answered, ready, with every dataset at rest.
	quiet bool
	// atRest: the dataset aimed at is protected or failed wherever it is
	// shown, and flushed: its flush ended wherever it is shown.
	atRest, flushed bool
}

// hit names the phase a kill now lands in.
func (p chaosPhase) hit() string {
	switch {
	case p.rebuilding:
		return phaseRebuild
	case p.flushing:
		return phaseFlush
	case p.encoding:
		return phaseEncode
	case p.completing:
		return phaseComplete
	}
	return phaseIdle
}

// statuses asks every live node of the job for its status, briefly;
// nodes that do not answer (down, starting) are left out.
func (ch *chaos) statuses() map[int]*control.Status {
	out := map[int]*control.Status{}
	for _, i := range ch.job {
		n := ch.c.Nodes[i]
		if n.hasExited() {
			continue
		}
		if st, err := n.statusWithin(2 * time.Second); err == nil {
			out[i] = st
			ch.observe(i, st)
		}
	}
	return out
}

// phaseOf reads the phase from the statuses, for dataset ds (nil: any).
func (ch *chaos) phaseOf(sts map[int]*control.Status, ds *chaosDataset) chaosPhase {
	p := chaosPhase{quiet: len(sts) == len(ch.job), atRest: true, flushed: true}
	for _, st := range sts {
		p.quiet = p.quiet && st.Node.Ready
		for _, row := range st.Datasets {
			p.quiet = p.quiet && ch.settledRow(row)
			p.rebuilding = p.rebuilding || row.Rebuild != nil || row.State == "rebuilding"
			p.flushing = p.flushing || (row.Flush != nil && row.Flush.State == control.FlushRunning)
			if ds == nil || row.Name != ds.name {
				continue
			}
			p.atRest = p.atRest && (row.State == "protected" || row.State == "failed")
			p.flushed = p.flushed && row.Flush != nil && (row.Flush.State == control.FlushDone || row.Flush.State == control.FlushFailed)
			switch {
			case row.State == "writing" && row.Completing != "", row.State == "complete" && row.Seq == 0:
				p.completing = true
			case row.State == "complete":
				p.encoding = true
			}
		}
	}
	return p
}

// await polls the job's phase (for dataset ds; nil: any) until hit or
// missed holds or wait passes, and returns the phase last seen. It asks
// again as soon as the statuses answer, not through testutil.Poll: it aims
// at a moment to kill in, and a phase may be over within Poll's pause.
func (ch *chaos) await(ds *chaosDataset, wait time.Duration, hit, missed func(chaosPhase) bool) chaosPhase {
	deadline := time.Now().Add(wait)
	for {
		p := ch.phaseOf(ch.statuses(), ds)
		if hit(p) || missed(p) || time.Now().After(deadline) {
			return p
		}
	}
}

// killIn kills nodes now, in phase p, and returns them.
func (ch *chaos) killIn(p chaosPhase) []int {
	victims := ch.pickVictims(ch.sc.victims, nil)
	ch.kill(victims, p.hit())
	ch.disturb()
	return victims
}

// observe notes what one node's status says of every dataset, and fails
// at once on what must never be seen.
func (ch *chaos) observe(node int, st *control.Status) {
	for _, rows := range [][]control.Dataset{st.Datasets, st.Failed} {
		for _, row := range rows {
			ds := ch.dataset(row.Name)
			if ds == nil {
				if row.State == "rebuilding" {
					continue // a dataset's rebuild starts before the store has a row of it
				}
				ch.t.Fatalf("node %d shows a dataset the test never wrote: %+v", node, row)
			}
			flush := ""
			if row.Flush != nil {
				flush = row.Flush.State
			}
			if ds.partial && (row.Seq > 0 || row.State == "protected" || row.State == "degraded" ||
				flush == control.FlushRunning || flush == control.FlushDone) {
				ch.t.Fatalf("node %d shows %s, interrupted while it was written, as %+v (flush %+v)", node, ds.name, row, row.Flush)
			}
			if row.Seq > 0 {
				ds.recorded, ds.recordedOn[node] = true, true
			}
			if row.State == "protected" && !ds.protected {
				ds.protected = true
				ch.counts.protected++
			}
			ds.flushed = ds.flushed || flush == control.FlushDone
			if flush == control.FlushFailed && !ds.flushFailed {
				ds.flushFailed = true
				ch.counts.flushFailed++
				ch.t.Logf("%s: node %d: flush of %s failed: %s", ch.sc.name, node, ds.name, row.Flush.Error)
			}
		}
	}
}

func (ch *chaos) dataset(name string) *chaosDataset {
	for _, ds := range ch.datasets {
		if ds.name == name {
			return ds
		}
	}
	return nil
}

// settled says whether a node's row of a dataset has come to rest with
// every node up: protected or failed, nothing rebuilt or flushed; or
// degraded, when members of the job that wrote it are not in the job now
// (their shares are hosted by others, or gone). A dataset being written is
// never at rest: once every node is up, one a kill interrupted must fail
// (the node that lost its share joins again and says so) and every other
// one was marked complete.
func (ch *chaos) settledRow(row control.Dataset) bool {
	if row.Rebuild != nil {
		return false
	}
	if row.Flush != nil && (row.Flush.State == control.FlushScheduled || row.Flush.State == control.FlushRunning) {
		return false
	}
	return row.State == "protected" || row.State == "failed" || ch.heldRow(row)
}

// heldRow says whether a row shows a dataset served: protected; degraded
// for members away; or recorded under SINGLE (a job of one node), which
// is never protected and reads complete.
func (ch *chaos) heldRow(row control.Dataset) bool {
	if row.State == "protected" {
		return true
	}
	ds := ch.dataset(row.Name)
	switch {
	case ds == nil:
		return false
	case row.State == "degraded":
		// While a cache is full, an encode cut short by it (the node that
		// got ENOSPC, or its peers, whose streams it aborted) waits for
		// the space.
		return len(ch.away(ds)) > 0 || (ch.fullNow && strings.HasPrefix(row.Reason, "encode failed"))
	case row.State == "complete":
		// A job of one node records what it writes or fetches so.
		return row.Seq > 0 && (ds.single || len(ch.job) == 1)
	}
	return false
}

// settle waits until every node is up and every dataset at rest, bounded:
// a dataset stuck degraded or flushing with every node up is a violation.
func (ch *chaos) settle() map[int]*control.Status {
	var sts map[int]*control.Status
	var last string
	settled := testutil.Poll(chaosSettle, func() bool {
		sts, last = ch.statuses(), ""
		for _, i := range ch.job {
			st := sts[i]
			if st == nil || !st.Node.Ready {
				last += fmt.Sprintf("node %d not answering or not ready; ", i)
				continue
			}
			if st.Node.TakingStock {
				// A node that asked for it may be ready before it ends
				// (its wait is bounded); its verdicts are still to come.
				last += fmt.Sprintf("node %d taking stock; ", i)
			}
			for _, row := range st.Datasets {
				if !ch.settledRow(row) {
					last += fmt.Sprintf("node %d: %s %s %q rebuild %v flush %+v; ", i, row.Name, row.State, row.Reason, row.Rebuild != nil, row.Flush)
				}
			}
		}
		return last == ""
	})
	if !settled {
		ch.t.Fatalf("HANG: the job did not settle within %v with every node up: %s", testutil.Scale(chaosSettle), last)
	}
	for _, ds := range ch.datasets {
		ds.settled = true
	}
	return sts
}

// evictable says whether ds may be gone by the cache size: at least
// cache_size newer datasets may have completed somewhere since.
func (ch *chaos) evictable(ds *chaosDataset) bool {
	newer := 0
	for _, d := range ch.datasets[slices.Index(ch.datasets, ds)+1:] {
		if d.marked {
			newer++
		}
	}
	return newer >= ch.cacheSz
}

// check verifies the invariants on settled statuses; all (after a
// recovery) re-reads every dataset every node holds, else only those not
// read since they settled; final re-reads every tree in the prefix too
// (else only those flushed since the last check).
func (ch *chaos) check(all, final bool) {
	sts := ch.settle()
	// A verdict reaches the nodes one by one: a dataset failed on some
	// nodes and protected on others is waited out, bounded.
	testutil.Poll(chaosSettle, func() bool {
		if ch.split(sts) == "" {
			return true
		}
		sts = ch.settle()
		return ch.split(sts) == ""
	})
	for _, ds := range ch.datasets {
		ch.checkDataset(ds, sts, all)
	}
	ch.checkIndex(final)
	ch.checkSameView()
	if ch.restartedAll {
		ch.restartedAll = false
		ch.checkNewest(func(ds *chaosDataset) bool { return len(ch.holders(ds, sts)) == len(ch.job) })
	}
}

// holders returns the nodes whose status shows ds served (heldRow).
func (ch *chaos) holders(ds *chaosDataset, sts map[int]*control.Status) []int {
	var out []int
	for i, st := range sts {
		if row := findRow(st, ds.name); row != nil && ch.heldRow(*row) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// split names a dataset some node shows failed and another protected.
func (ch *chaos) split(sts map[int]*control.Status) string {
	for _, ds := range ch.datasets {
		failed, held := false, false
		for _, st := range sts {
			if row := findRow(st, ds.name); row != nil {
				failed = failed || row.State == "failed"
				held = held || row.State == "protected"
			}
		}
		if failed && held {
			return ds.name
		}
	}
	return ""
}

// checkDataset checks one dataset against every node's settled status.
func (ch *chaos) checkDataset(ds *chaosDataset, sts map[int]*control.Status, all bool) {
	var failed []int
	reason := ""
	for i, st := range sts {
		if row := findRow(st, ds.name); row != nil && row.State == "failed" {
			failed = append(failed, i)
			reason = row.Reason
		}
	}
	held := ch.holders(ds, sts)
	slices.Sort(failed)
	if len(ch.job) == 1 && len(held) > 0 {
		ds.single = true
	}
	if ds.failed != "" && len(held) > 0 && ch.inPrefix(ds) && (!ds.keptAway || len(ch.away(ds)) > 0) {
		// Every node lost what it could restart from, and the job
		// fetched the newest complete dataset from the prefix: this one,
		// recorded anew. It must read back as written.
		ch.t.Logf("%s: %s, failed in the caches, came back from the prefix", ch.sc.name, ds.name)
		ch.counts.fetched++
		// Recorded anew by this job: its members and scheme are today's.
		_, ds.tolerance = ch.sc.sized(len(ch.job))
		ds.failed, ds.lost, ds.members, ds.single = "", map[int]bool{}, slices.Clone(ch.job), len(ch.job) == 1
	}
	if ds.failed != "" && ds.keptAway && len(held) > 0 && len(failed) == 0 {
		// Failed for members away, kept: they are back, and it is served
		// again (or the prefix gave it back).
		ch.t.Logf("%s: %s, failed while members were away, is served again", ch.sc.name, ds.name)
		ch.counts.revived++
		ds.failed, ds.keptAway = "", false
	}
	if ds.failed != "" {
		if len(held) > 0 {
			ch.t.Fatalf("%s failed (%s) but nodes %v hold it protected", ds.name, ds.failed, held)
		}
		if ds.keptAway {
			if ch.returned(ds) {
				ch.t.Fatalf("%s failed while members were away (%s); every member is back with its share (lost: %v), yet it is not served again",
					ds.name, ds.failed, slices.Sorted(maps.Keys(ds.lost)))
			}
			ch.checkKept(ds)
		}
		return
	}
	if len(failed) > 0 {
		if len(held) > 0 {
			ch.t.Fatalf("%s failed on nodes %v (%s) and protected on nodes %v", ds.name, failed, reason, held)
		}
		ch.judgeFailure(ds, reason)
		if ds.keptAway {
			ch.checkKept(ds)
		}
		return
	}
	if ds.partial {
		return // never seen recorded (observe), and not failed yet: left writing without its marker
	}
	// Rebuilt shares are no longer lost.
	for _, i := range held {
		delete(ds.lost, i)
	}
	switch {
	case len(held) == len(ch.job):
		ch.verifyMounts(ds, all)
	case ch.evictable(ds):
		if len(held) == 0 && !ds.evicted {
			ds.evicted = true
			ch.counts.evicted++
		}
	case !ds.marked && ds.disturbed:
		// Its marker never came: nothing to hold.
	case len(held) == 0 && ch.allLost(ds):
		// Every member's cache was wiped before it was rebuilt anywhere:
		// no node is left to hold it, or to remember that it failed.
		ds.failed = "lost on every node"
		ch.counts.failedTrue++
		ch.t.Logf("%s: %s lost with every node's cache", ch.sc.name, ds.name)
	case len(held) == 0 && ch.nothingHere(ds):
		// Its members in the job lost their shares, the others are away
		// with theirs: the job knows nothing of it until they are back.
		ds.keptAway = true
		ds.failed = "nothing of it in the job"
		ch.t.Logf("%s: %s: nothing of it in the job, its other members away", ch.sc.name, ds.name)
	default:
		ch.t.Fatalf("%s (protected before: %v, recorded: %v, lost shares %v, members %v, job %v) is held protected on nodes %v only, and no node says it failed",
			ds.name, ds.protected, ds.recorded, slices.Sorted(maps.Keys(ds.lost)), ds.members, ch.job, held)
	}
}

// nothingHere says whether every member of ds in the job lost its share.
func (ch *chaos) nothingHere(ds *chaosDataset) bool {
	for _, m := range ds.members {
		if ch.inJob(m) && !ds.lost[m] {
			return false
		}
	}
	return true
}

// allLost says whether every member of ds lost its share.
func (ch *chaos) allLost(ds *chaosDataset) bool {
	for _, m := range ds.members {
		if !ds.lost[m] {
			return false
		}
	}
	return true
}

// inPrefix says whether the prefix index listed ds complete, its tree
// verified.
func (ch *chaos) inPrefix(ds *chaosDataset) bool {
	_, ok := ch.checkedIndex[ds.name]
	return ok
}

// judgeFailure accepts a failure only with a reason that is true: a
// dataset once protected fails only for losing more members than its
// scheme tolerates; one recorded but never protected (its encode cut off,
// so its redundancy is incomplete) for losing one; and one that was never
// recorded only because a kill interrupted it.
func (ch *chaos) judgeFailure(ds *chaosDataset, reason string) {
	// Members whose nodes are not in the job now are away: as good as
	// lost until they return.
	away := ch.away(ds)
	lost := len(ds.lost)
	for _, m := range away {
		if !ds.lost[m] {
			lost++
		}
	}
	var ok bool
	switch {
	case ds.partial:
		ok = true
		ch.counts.failedPartial++
	case strings.Contains(reason, "could not keep its record"):
		ok = ds.recordRefused
		ch.counts.recordRefused++
	case strings.Contains(reason, "after sharing it"):
		// A node killed (wiped) between its share and the record.
		ok = ds.disturbed && !ds.protected
		ch.counts.failedUnrecorded++
	case strings.Contains(reason, "tolerates") || strings.Contains(reason, "never protected"):
		// A dataset past the cache size may have been evicted on some
		// nodes (the newer one that pushed it out failed later): those
		// count as lost shares too, and the test cannot tell which.
		// A rebuild in a job of another order or size moves shares to
		// other nodes than the ones that wrote them: the records say
		// where they are (placement).
		ok = lost > ds.tolerance || (!ds.protected && lost > 0) || ch.evictable(ds) || ch.beyondTolerance(ds.name)
		ch.counts.failedTrue++
		ds.keptAway = len(away) > 0
	default:
		// A record only wiped nodes ever reported went with them.
		ok = len(ds.recordedOn) == 0 && ds.disturbed
		ch.counts.failedUnrecorded++
	}
	if !ok {
		ch.t.Fatalf("%s failed saying %q, which is not true: protected before %v, recorded %v (on nodes %v not wiped since), disturbed %v, shares lost (wiped, not rebuilt) on nodes %v, members away %v, it tolerates %d",
			ds.name, reason, ds.protected, ds.recorded, slices.Sorted(maps.Keys(ds.recordedOn)), ds.disturbed, slices.Sorted(maps.Keys(ds.lost)), away, ds.tolerance)
	}
	ds.failed = reason
	ch.t.Logf("%s: %s failed: %s", ch.sc.name, ds.name, reason)
}

// verifyMounts reads ds through every node's mount: byte-identical to
// what was written, every file on every node.
func (ch *chaos) verifyMounts(ds *chaosDataset, all bool) {
	if !all && ds.evicted {
		return
	}
	for _, i := range ch.job {
		n := ch.c.Nodes[i]
		var got map[string]string
		err := within(chaosOp, func() (err error) {
			got, err = sumTree(n.Path(ds.name))
			return err
		})
		if errors.Is(err, errHang) {
			ch.t.Fatalf("HANG: reading %s through node %d's mount: %v", ds.name, i, err)
		}
		if errors.Is(err, os.ErrNotExist) && ch.evictable(ds) {
			// Evicted once a newer one settled, after the statuses said
			// it was there.
			return
		}
		if err != nil {
			ch.t.Fatalf("reading %s, protected on every node, through node %d's mount: %v", ds.name, i, err)
		}
		if !maps.Equal(got, ds.files) {
			ch.t.Fatalf("%s through node %d's mount differs from what was written:\n%s", ds.name, i, diffSums(got, ds.files))
		}
	}
	ch.counts.verifiedReads++
}

// diffSums lists the paths whose sums differ.
func diffSums(got, want map[string]string) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if got[p] != want[p] {
			fmt.Fprintf(&b, "  %s: %.12s, written %.12s\n", p, got[p], want[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			fmt.Fprintf(&b, "  %s: %.12s, never written\n", p, got[p])
		}
	}
	return b.String()
}

// checkIndex verifies the prefix index: every dataset it lists complete
// was written whole and is in the prefix byte-identical; every dataset a
// node reported flushed is listed complete.
func (ch *chaos) checkIndex(all bool) {
	if _, err := os.Stat(filepath.Join(ch.prefix, ".scrfs", "index.json")); errors.Is(err, os.ErrNotExist) {
		for _, ds := range ch.datasets {
			if ds.flushed {
				ch.t.Fatalf("%s reported flushed, but the prefix has no index", ds.name)
			}
		}
		return
	}
	ix := readPrefixIndex(ch.t, ch.prefix)
	for _, e := range ix.Datasets {
		ds := ch.dataset(e.Name)
		if ds == nil {
			ch.t.Fatalf("the prefix index lists a dataset the test never wrote: %+v", e)
		}
		if e.State != "complete" {
			continue
		}
		if ds.partial {
			ch.t.Fatalf("the prefix index lists %s complete, which a kill interrupted while it was written: %+v", ds.name, e)
		}
		if seen, ok := ch.checkedIndex[e.Name]; ok && seen.Equal(e.Flushed) && !all {
			continue
		}
		var got map[string]string
		err := within(chaosOp, func() (err error) {
			got, err = sumTree(filepath.Join(ch.prefix, e.Name))
			return err
		})
		if err != nil {
			ch.t.Fatalf("the prefix index lists %s complete, but its tree cannot be read: %v", e.Name, err)
		}
		if !maps.Equal(got, ds.files) {
			ch.t.Fatalf("the prefix index lists %s complete, but the prefix holds other bytes:\n%s", e.Name, diffSums(got, ds.files))
		}
		if _, ok := ch.checkedIndex[e.Name]; !ok {
			ch.counts.flushed++
		}
		ch.checkedIndex[e.Name] = e.Flushed
		ch.counts.prefixVerified++
	}
	for _, ds := range ch.datasets {
		if ds.flushed && (!ix.has(ds.name) || ix.entry(ch.t, ds.name).State != "complete") {
			ch.t.Fatalf("%s reported flushed, but the prefix index does not list it complete: %+v", ds.name, ix.Datasets)
		}
	}
}

// scanLogs fails on a panic or fatal error in any daemon's log, reading
// each line once.
func (ch *chaos) scanLogs() {
	for i, n := range ch.c.Nodes {
		for _, w := range append(slices.Clone(n.past), n.log) {
			w.mu.Lock()
			lines := w.lines[ch.scanned[w]:]
			ch.scanned[w] += len(lines)
			w.mu.Unlock()
			for _, l := range lines {
				if strings.Contains(l, "panic") || strings.Contains(l, "fatal error") {
					ch.t.Fatalf("node %d's log shows a panic or fatal error: %s", i, l)
				}
			}
		}
	}
}
