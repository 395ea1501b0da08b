package e2e

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/control"
)

// TestChaos is issue 12's bounded chaos test: four real daemons write a
// stream of small checkpoints (random file counts and sizes, completed by
// a marker, flushed every few), while nodes are killed with SIGKILL at
// random moments — mid-write, mid-completion, mid-encode, mid-flush,
// mid-rebuild, aimed at by the states `scrfs status --json` shows — and
// restarted, with their cache and control directories or wiped. After
// every recovery it checks what the product promises (chaos_check_test.go):
// every dataset ever reported protected or flushed reads back
// byte-identical through every node's mount, or failed with a true reason;
// the prefix index lists nothing complete that differs from what was
// written; a checkpoint a kill interrupted is never complete anywhere; no
// call or wait hangs; no daemon panics.
//
// Issue 26 extends it with what a restart on another node set and a full
// cache do (chaos_nodes_test.go): between the kills the whole job is now
// and then restarted on fewer nodes (within its schemes' tolerance, and
// beyond it), in another order, and back on its full node list with the
// returning nodes' caches; and now and then a node's cache fills up while
// a checkpoint is written there. The checks after every recovery add:
// nothing whose data survives somewhere is deleted (a dataset failed for
// members away is kept where it is, and served again once they are back);
// after a restart of the whole job, the newest intact checkpoint, in the
// caches or the prefix, is the one served; every mount shows the same
// datasets; every dataset being written settles within its bound.
//
// A run is reproducible in its decisions (not its timing) from the seed it
// prints: -chaos.seed=N replays them, -chaos.duration=30m runs longer (with
// -timeout 0 or a go test timeout above twice that).

var (
	chaosDuration = flag.Duration("chaos.duration", 0, "how long TestChaos runs each scheme (0: the CI bound, "+chaosCI.String()+")")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "replay TestChaos with this seed (0: a new seed, printed)")
)

// chaosCI is how long each scheme's loop runs in a plain go test: both,
// with start-up and the final checks, stay under three minutes.
const chaosCI = 50 * time.Second

// chaosScheme is one redundancy configuration under chaos.
type chaosScheme struct {
	name      string
	env       []string
	tolerance int // members of a set the scheme can lose
	victims   int // nodes killed at once, at most
	// sized is what a job of n nodes changes in env (a scheme that does
	// not fit so few nodes), and the members its sets can lose.
	sized func(n int) (env []string, tolerance int)
}

var chaosSchemes = []chaosScheme{
	{"xor", []string{"SCRFS_REDUNDANCY_SCHEME=xor"}, 1, 1, func(n int) ([]string, int) {
		if n == 1 {
			return []string{"SCRFS_REDUNDANCY_SCHEME=single"}, 0
		}
		return nil, 1
	}},
	{"rs", []string{"SCRFS_REDUNDANCY_SCHEME=rs", "SCRFS_REDUNDANCY_PARITY=2"}, 2, 2, func(n int) ([]string, int) {
		switch n {
		case 1:
			return []string{"SCRFS_REDUNDANCY_SCHEME=single"}, 0
		case 2:
			return []string{"SCRFS_REDUNDANCY_PARITY=1"}, 1
		}
		return nil, 2
	}},
}

// The phases a kill aims at; a kill is counted by the phase the status
// showed just before it (which is what the kill hit, give or take the
// milliseconds between the last status and the signal).
const (
	phaseWrite    = "mid-write"      // the dataset's files are being written
	phaseComplete = "mid-completion" // a completion rule fired, no record yet
	phaseEncode   = "mid-encode"     // recorded, redundancy under way
	phaseFlush    = "mid-flush"      // a flush round copies
	phaseRebuild  = "mid-rebuild"    // a lost member is being rebuilt
	phaseIdle     = "idle"           // nothing under way: a plain crash
	// phaseFull aims no kill: a node's cache fills up while the
	// checkpoint is written there (chaos_nodes_test.go).
	phaseFull = "cache full"
)

// The bounds of every wait: exceeding one is a hang, reported as a
// violation with the daemons' logs.
const (
	chaosOp     = 60 * time.Second  // one file operation, one CLI call
	chaosReady  = 90 * time.Second  // a (re)started daemon becomes ready
	chaosSettle = 150 * time.Second // every dataset and flush settles
)

func TestChaos(t *testing.T) {
	requireFUSE(t)
	seed := *chaosSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	d := *chaosDuration
	if d == 0 {
		d = chaosCI
	}
	t.Logf("chaos seed %d (replay with -chaos.seed=%d), %v per scheme", seed, seed, d)
	for i, sc := range chaosSchemes {
		t.Run(sc.name, func(t *testing.T) {
			ch := newChaos(t, sc, seed+uint64(i))
			ch.run(d)
		})
	}
}

// chaos is one scheme's run: the job, the model of what was written, and
// the counts.
type chaos struct {
	t        *testing.T
	c        *Cluster
	sc       chaosScheme
	rng      *rand.Rand
	prefix   string
	cacheSz  int
	datasets []*chaosDataset // in the order they were begun
	counts   chaosCounts
	// job are the nodes the job runs on now, in its order: ch.job[j] (an
	// index into ch.c.Nodes, which the test calls the node) is node j of
	// the job. The others are stopped, their caches kept.
	job []int
	// small: every node's cache is a small file system of its own, which
	// the test can fill up (root only); fullNow: one is full now.
	small, fullNow bool
	// restartedAll: the whole job restarted since the last check, which
	// then checks that it serves the newest intact checkpoint.
	restartedAll bool
	// checkedIndex remembers the index entries whose prefix trees were
	// verified, by name and flush time.
	checkedIndex map[string]time.Time
	scanned      map[*logWatch]int // log lines scanned for panics
}

// chaosCounts is what a run did and saw, reported at its end.
type chaosCounts struct {
	iterations, restarts, wipes int
	kills                       map[string]int // by the phase hit
	datasets, partial           int            // begun; interrupted while written
	protected, verifiedReads    int            // datasets ever protected; dataset trees read back identical
	failedTrue, failedPartial   int            // protected or recorded datasets failed beyond tolerance; partial ones failed
	failedUnrecorded            int            // failed at completion with a kill during it
	flushed, flushFailed        int            // flushes that reached the index; flushes failed with a reason
	prefixVerified, evicted     int            // index entries whose trees were checked; datasets gone by the cache size
	writeErrors                 int            // writes refused on live nodes during a mid-write kill
	fetched                     int            // datasets failed in the caches that came back from the prefix
	nodeSets                    map[string]int // restarts of the whole job on another node set, by kind
	fullCaches, enospc          int            // caches filled up while a checkpoint was written; writes that got ENOSPC
	recordRefused               int            // checkpoints failed for a record a full cache could not keep
	kept, revived               int            // datasets failed for members away whose files were found kept; served again once back
	newest                      int            // restarts of the whole job checked to serve the newest intact checkpoint
	sameView                    int            // checks that every mount showed the same datasets
}

func newChaos(t *testing.T, sc chaosScheme, seed uint64) *chaos {
	t.Logf("%s: seed %d", sc.name, seed)
	ch := &chaos{
		t: t, sc: sc, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		prefix: t.TempDir(), cacheSz: 2,
		counts:       chaosCounts{kills: map[string]int{}, nodeSets: map[string]int{}},
		checkedIndex: map[string]time.Time{},
		scanned:      map[*logWatch]int{},
	}
	logDir, err := os.MkdirTemp("", "scrfs-chaos-"+sc.name+"-")
	must(t, err)
	env := append([]string{
		"SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		fmt.Sprintf("SCRFS_DATASETS_CACHE_SIZE=%d", ch.cacheSz),
		"SCRFS_PATHS_PREFIX=" + ch.prefix,
		"SCRFS_FLUSH_EVERY=3",
		// Slow enough that a kill can land inside a round.
		"SCRFS_FLUSH_BANDWIDTH=4MiB",
		"SCRFS_REDUNDANCY_PIECE_SIZE=64KiB",
		"SCRFS_RESTART_MEMBER_TIMEOUT=10s",
		"SCRFS_LOG_LEVEL=info",
		// Other nodes' files read back through the mounts stay within
		// the small caches.
		"SCRFS_NAMESPACE_READ_CACHE=16MiB",
	}, sc.env...)
	ch.c = NewCluster(t, 4, env...)
	ch.small = os.Geteuid() == 0
	for i, n := range ch.c.Nodes {
		n.LogFile = filepath.Join(logDir, fmt.Sprintf("node%d.log", i))
		ch.job = append(ch.job, i)
		if ch.small {
			ch.small = mountSmall(t, n.Cache, chaosCacheBytes)
		}
	}
	if !ch.small {
		t.Logf("%s: the caches are not file systems of their own (not root, or no tmpfs): no cache fills up", sc.name)
	}
	t.Cleanup(func() {
		ch.report()
		if !t.Failed() {
			os.RemoveAll(logDir)
		}
	})
	ch.c.Start()
	return ch
}

// run writes checkpoints and kills nodes until d has passed, then checks
// everything once more.
func (ch *chaos) run(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ch.iteration()
	}
	ch.check(true, true)
	ch.scanLogs()
}

// iteration writes one checkpoint, perhaps kills nodes at a phase of its
// life, recovers them, and checks the invariants.
func (ch *chaos) iteration() {
	ch.counts.iterations++
	start := time.Now()
	if ch.rng.IntN(100) < 15 {
		ch.changeNodes()
		ch.check(true, false)
	}
	ds := ch.begin()
	aim := ch.pickAim()
	var victims []int
	var hit string
	if aim == phaseFull {
		ch.writeFull(ds)
		ch.t.Logf("%s %s: cache full, checked after %.1fs", ch.sc.name, ds.name, time.Since(start).Seconds())
		ch.check(false, false)
		ch.scanLogs()
		return
	}
	if aim == phaseWrite {
		victims, hit = ch.writeAndKill(ds)
		if ch.rng.IntN(2) == 0 {
			// The marker while the killed nodes are still down.
			ch.mark(ds)
		}
	} else {
		ch.write(ds)
		ch.mark(ds)
		var p chaosPhase
		switch aim {
		case phaseEncode:
			p = ch.await(ds, 10*time.Second, func(p chaosPhase) bool { return p.completing || p.encoding },
				func(p chaosPhase) bool { return p.atRest })
		case phaseFlush:
			ch.settle()
			ch.flush(ds)
			p = ch.await(ds, 10*time.Second, func(p chaosPhase) bool { return p.flushing },
				func(p chaosPhase) bool { return p.flushed })
		case phaseIdle:
			time.Sleep(time.Duration(ch.rng.IntN(500)) * time.Millisecond) // the random moment itself
			p = ch.phaseOf(ch.statuses(), ds)
		}
		if aim != "" {
			// Aimed and missed (the phase was over before it was seen),
			// the kill still lands at a random moment.
			victims, hit = ch.killIn(p), p.hit()
		}
	}
	ch.t.Logf("%s %s: aimed %s, hit %q, killed %v", ch.sc.name, ds.name, aim, hit, victims)
	if len(victims) > 0 {
		ch.recover(victims, true)
	}
	if aim == phaseWrite && !ds.marked {
		ch.mark(ds)
	}
	ch.check(len(victims) > 0, false)
	ch.scanLogs()
	ch.t.Logf("%s %s: checked after %.1fs", ch.sc.name, ds.name, time.Since(start).Seconds())
}

// pickAim chooses the phase this iteration's kill aims at, or "" for none.
func (ch *chaos) pickAim() string {
	switch r := ch.rng.IntN(100); {
	case r < 8 && ch.small:
		return phaseFull
	case r < 30:
		return ""
	case r < 50:
		return phaseWrite
	case r < 72:
		return phaseEncode
	case r < 90:
		return phaseFlush
	default:
		return phaseIdle
	}
}

// pickVictims chooses up to the scheme's number of distinct nodes of the
// job to kill (rs: two at once, now and then one), leaving out those in
// skip.
func (ch *chaos) pickVictims(most int, skip []int) []int {
	k := most
	if k > 1 && ch.rng.IntN(4) == 0 {
		k = 1
	}
	var out []int
	for _, j := range ch.rng.Perm(len(ch.job)) {
		if i := ch.job[j]; len(out) < k && !slices.Contains(skip, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// kill SIGKILLs nodes and counts the kill by the phase it hit.
func (ch *chaos) kill(victims []int, hit string) {
	for _, v := range victims {
		ch.c.Nodes[v].Kill()
	}
	ch.counts.kills[hit]++
}

// recover restarts killed nodes, each with its cache and control
// directories or wiped (then every share it held of a dataset not yet
// rebuilt there counts as lost); after a wipe, now and then, a second kill
// aims at the rebuild that follows.
func (ch *chaos) recover(victims []int, mayAimRebuild bool) {
	var wiped []int
	for _, v := range victims {
		if ch.rng.IntN(2) == 0 {
			wipe(ch.t, ch.c.Nodes[v])
			ch.lose(v)
			wiped = append(wiped, v)
			ch.counts.wipes++
		}
	}
	for _, v := range victims {
		ch.c.Nodes[v].StartNoWait()
		ch.counts.restarts++
	}
	if len(wiped) > 0 && mayAimRebuild && ch.rng.IntN(2) == 0 && ch.anyHeld() {
		p := ch.await(nil, 30*time.Second, func(p chaosPhase) bool { return p.rebuilding },
			func(p chaosPhase) bool { return p.quiet })
		if p.rebuilding {
			more := ch.killIn(p)
			ch.t.Logf("%s: killed %v %s", ch.sc.name, more, phaseRebuild)
			// Nodes killed twice start once.
			var rest []int
			for _, v := range victims {
				if !slices.Contains(more, v) {
					rest = append(rest, v)
				}
			}
			ch.recover(more, false)
			victims = rest
		}
	}
	for _, v := range victims {
		ch.waitReady(v)
	}
}

// waitReady waits until node v is ready, a hang otherwise.
func (ch *chaos) waitReady(v int) {
	n := ch.c.Nodes[v]
	ok, last := n.pollStatus(chaosReady, func(st *control.Status) (bool, string) { return st.Node.Ready, "not ready" })
	if !ok {
		ch.t.Fatalf("HANG: node %d not ready within %v after its restart (exited: %v): %s", v, chaosReady, n.hasExited(), last)
	}
}

// anyHeld says whether some dataset could be rebuilt: one recorded and
// neither failed nor past the cache size.
func (ch *chaos) anyHeld() bool {
	for _, ds := range ch.datasets {
		if ds.recorded && ds.failed == "" && !ch.evictable(ds) {
			return true
		}
	}
	return false
}

// lose notes that node v's cache was wiped: every dataset it may hold a
// share of, and that is not rebuilt there yet, lost that member. A
// dataset it held failed, its files kept, lost them; a record it held is
// gone from there.
func (ch *chaos) lose(v int) {
	for _, ds := range ch.datasets {
		delete(ds.recordedOn, v)
		if !ds.partial && ds.marked && slices.Contains(ds.members, v) && (ds.failed == "" || ds.keptAway) {
			ds.lost[v] = true
		}
	}
}

// flush asks for a flush of ds (without waiting), as `scrfs flush` would.
func (ch *chaos) flush(ds *chaosDataset) {
	n := ch.c.Nodes[ch.job[ch.rng.IntN(len(ch.job))]]
	out, errs, code, err := n.CLIWithin(chaosOp, "flush", ds.name)
	if err != nil {
		ch.t.Fatalf("HANG: %v", err)
	}
	if code != 0 && !strings.Contains(errs, "flushed already") {
		ch.t.Logf("%s: scrfs flush %s: exit %d: %s%s", ch.sc.name, ds.name, code, out, errs)
	}
}

// report prints the counts; visible with -v, and on failure.
func (ch *chaos) report() {
	c := ch.counts
	var kills []string
	for _, p := range []string{phaseWrite, phaseComplete, phaseEncode, phaseFlush, phaseRebuild, phaseIdle} {
		kills = append(kills, fmt.Sprintf("%s %d", p, c.kills[p]))
	}
	ch.t.Logf("%s chaos: %d iterations; kills by phase: %s; %d restarts, %d wipes", ch.sc.name, c.iterations, strings.Join(kills, ", "), c.restarts, c.wipes)
	ch.t.Logf("%s chaos: %d datasets written (%d interrupted while written, %d of them seen failed, none ever recorded), %d ever protected, %d trees read back identical through the mounts, %d failed beyond tolerance (true), %d failed at completion after a kill, %d evicted by the cache size",
		ch.sc.name, c.datasets, c.partial, c.failedPartial, c.protected, c.verifiedReads, c.failedTrue, c.failedUnrecorded, c.evicted)
	ch.t.Logf("%s chaos: %d datasets flushed and verified in the prefix (%d index entries checked), %d flushes failed with a reason, %d fetched back after every cache lost them, %d writes refused during a mid-write kill",
		ch.sc.name, c.flushed, c.prefixVerified, c.flushFailed, c.fetched, c.writeErrors)
	var sets []string
	for _, k := range []string{setFewer, setBeyond, setOrder, setBack} {
		sets = append(sets, fmt.Sprintf("%s %d", k, c.nodeSets[k]))
	}
	ch.t.Logf("%s chaos: node-set changes: %s; %d caches filled up (%d writes got ENOSPC, %d checkpoints failed for a record not kept); %d datasets failed for members away found kept, %d served again once they were back; %d restarts of the whole job served the newest intact checkpoint; %d checks that every mount showed the same datasets",
		ch.sc.name, strings.Join(sets, ", "), c.fullCaches, c.enospc, c.recordRefused, c.kept, c.revived, c.newest, c.sameView)
}
