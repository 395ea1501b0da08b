package redundancy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/record"
)

// rec returns the record of dataset name (sequence seq) completed by four
// nodes id0…id3 in one set of scheme kind.
func rec(name string, seq uint64, kind string, parity, replicas int) *record.Record {
	r := &record.Record{Version: record.Version, Dataset: name, Kind: "dir", Root: name, Seq: seq,
		Scheme: record.Scheme{Kind: kind, Parity: parity, Replicas: replicas, Sets: 1}}
	for n := range 4 {
		r.Members = append(r.Members, record.Member{Node: n, ID: fmt.Sprintf("id%d", n), Rank: n})
	}
	return r
}

// held is one dataset in an inventory: its record, and the shares the node
// holds, each "idN" (intact) or "idN!" (present but not verifiable).
type held struct {
	rec    *record.Record
	shares []string
	state  cache.State
}

func has(r *record.Record, shares ...string) held {
	return held{rec: r, shares: shares, state: cache.Protected}
}

// inv builds node's inventory; its identity is idN unless named.
func inv(node int, id string, ds ...held) *inventoryMsg {
	if id == "" {
		id = fmt.Sprintf("id%d", node)
	}
	m := &inventoryMsg{Node: node, ID: id}
	for _, d := range ds {
		item := invDataset{Name: d.rec.Dataset, Kind: cache.KindDir, Root: d.rec.Dataset, State: d.state, Record: d.rec}
		for _, s := range d.shares {
			member, damaged := strings.CutSuffix(s, "!")
			item.Shares = append(item.Shares, heldShare{Member: member, Intact: !damaged})
		}
		m.Datasets = append(m.Datasets, item)
	}
	return m
}

// own is a four-node job in which node n holds its own share (intact
// unless n is in bad) of r, and no inventory for the nodes in gone.
func own(r *record.Record, gone []int, bad ...int) map[int]*inventoryMsg {
	out := map[int]*inventoryMsg{}
	for n := range 4 {
		switch {
		case slices.Contains(gone, n):
		case slices.Contains(bad, n):
			out[n] = inv(n, "", has(r, fmt.Sprintf("id%d!", n)))
		default:
			out[n] = inv(n, "", has(r, fmt.Sprintf("id%d", n)))
		}
	}
	return out
}

func TestPlan(t *testing.T) {
	xor := rec("c", 1, "xor", 0, 0)
	rs := rec("c", 1, "rs", 2, 0)
	partner := rec("c", 1, "partner", 0, 1)
	empty := func(invs map[int]*inventoryMsg, ns ...int) map[int]*inventoryMsg {
		for _, n := range ns {
			invs[n] = inv(n, fmt.Sprintf("new%d", n))
		}
		return invs
	}
	tests := []struct {
		name   string
		nodes  int
		invs   map[int]*inventoryMsg
		want   actionKind // "" = nothing to do
		lost   []int
		reason string
	}{
		{"all intact", 4, own(xor, nil), "", nil, ""},
		{"replacement with empty cache", 4, empty(own(xor, []int{2}), 2), actRebuild, []int{2}, ""},
		{"corrupt copy counts as lost", 4, own(xor, nil, 1), actRebuild, []int{1}, ""},
		{"two lost beyond xor", 4, empty(own(xor, []int{1, 2}), 1, 2), actFail, nil, "nodes 1, 2"},
		{"two lost within rs k=2", 4, empty(own(rs, []int{1, 2}), 1, 2), actRebuild, []int{1, 2}, ""},
		{"lost member unreachable", 4, own(xor, []int{2}), actDegrade, nil, "node 2 unreachable"},
		// While a node is away, a share no answering node holds may be on it
		// (hosted there): it is not counted lost until every node answered.
		{"replacement while another is away", 4, empty(own(xor, []int{1, 2}), 1), actDegrade, nil, "nodes 1, 2 unreachable"},
		{"unreachable never counts as lost", 4, own(xor, []int{1, 2, 3}), actDegrade, nil, "nodes 1, 2, 3 unreachable"},
		{"lost beyond xor while another is away", 4, empty(own(xor, []int{1, 2, 3}), 1, 2), actDegrade, nil, "nodes 1, 2, 3 unreachable"},
		{"damaged beyond xor while another is away", 4, own(xor, []int{3}, 1, 2), actFail, nil, "nodes 1, 2"},
		{"partner adjacent loss", 4, empty(own(partner, []int{1, 2}), 1, 2), actFail, nil, ""},
		{"partner spaced loss", 4, empty(own(partner, []int{0, 2}), 0, 2), actRebuild, []int{0, 2}, ""},
		{"never encoded, all present", 4, own(xor, nil, 0, 1, 2, 3), actProtect, nil, ""},
		{"never encoded, one missing", 4, empty(own(xor, []int{1}, 0, 2, 3), 1), actFail, nil, "node 1"},
		{"restarted on three nodes: node 3's share rebuilt onto a host", 3, own(xor, []int{3}), actRebuild, []int{3}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acts := plan(tt.nodes, tt.invs)
			if tt.want == "" {
				if len(acts) != 0 {
					t.Fatalf("plan %+v, want nothing", acts)
				}
				return
			}
			// Nodes that hold no share of it (wiped ones) are shown it last.
			if len(acts) == 2 && acts[1].Kind == actView {
				acts = acts[:1]
			}
			if len(acts) != 1 {
				t.Fatalf("plan %+v, want one action", acts)
			}
			a := acts[0]
			if a.Kind != tt.want || !slices.Equal(a.Lost, tt.lost) || !strings.Contains(a.Reason, tt.reason) {
				t.Fatalf("got %s lost %v reason %q; want %s lost %v reason containing %q", a.Kind, a.Lost, a.Reason, tt.want, tt.lost, tt.reason)
			}
		})
	}
}

// A job of four nodes restarted on three keeps node 3's share on the node
// of the nearest intact rank to its right (rank 0), which plays both.
func TestPlanHostsOnFewerNodes(t *testing.T) {
	acts := plan(3, own(rec("c", 1, "xor", 0, 0), []int{3}))
	if len(acts) != 1 || !slices.Equal(acts[0].Nodes, []int{0, 1, 2, 0}) || !slices.Equal(acts[0].To, []int{0, 1, 2}) {
		t.Fatalf("plan %+v", acts)
	}
	r := rebuiltRecord(acts[0].Dataset.Record, 0, acts[0].Lost, acts[0].Nodes, map[int]string{0: "id0", 1: "id1", 2: "id2"})
	if got := r.Member("id3").HeldBy(); got != "id0" || r.Rev != 1 {
		t.Fatalf("rebuilt record: member id3 held by %s, rev %d", got, r.Rev)
	}
}

// Back on four nodes after that: node 3 returns with its share intact. The
// record follows the share home and the set is no longer degraded; nothing
// is lost or rebuilt.
func TestPlanShareReturnsHome(t *testing.T) {
	old := rec("c", 1, "xor", 0, 0)
	hosted := movedRecord(old, 0, map[int]string{3: "id0"})
	deg := held{rec: hosted, shares: []string{"id0", "id3"}, state: cache.Degraded}
	invs := map[int]*inventoryMsg{
		0: inv(0, "", deg),
		1: inv(1, "", held{rec: hosted, shares: []string{"id1"}, state: cache.Degraded}),
		2: inv(2, "", held{rec: hosted, shares: []string{"id2"}, state: cache.Degraded}),
		3: inv(3, "", has(old, "id3")),
	}
	acts := plan(4, invs)
	kinds := []actionKind{}
	for _, a := range acts {
		kinds = append(kinds, a.Kind)
	}
	if !slices.Equal(kinds, []actionKind{actRevise, actClear}) {
		t.Fatalf("actions %v, want revise then clear", kinds)
	}
	r := acts[0].Dataset.Record
	if r.Member("id3").HeldBy() != "id3" || !r.Newer(hosted) || !slices.Equal(acts[0].To, []int{0, 1, 2, 3}) {
		t.Fatalf("revised record %+v to %v", r.Members, acts[0].To)
	}
}

// Back on four nodes with node 3 wiped: node 3 holds no share of it, so
// the share node 0 hosts is rebuilt onto node 3, and the set is protected
// again, each share on a node of its own (issue 26); with no such node
// (node 3 still away) the host keeps both shares, and the set stays
// degraded saying why, rather than being reported protected.
func TestPlanHostedTwice(t *testing.T) {
	hosted := movedRecord(rec("c", 1, "xor", 0, 0), 0, map[int]string{3: "id0"})
	invs := map[int]*inventoryMsg{
		0: inv(0, "", held{rec: hosted, shares: []string{"id0", "id3"}, state: cache.Degraded}),
		1: inv(1, "", has(hosted, "id1")),
		2: inv(2, "", has(hosted, "id2")),
		3: inv(3, "new3"),
	}
	acts := plan(4, invs)
	if len(acts) != 1 || acts[0].Kind != actRebuild || !slices.Equal(acts[0].Lost, []int{3}) || !slices.Equal(acts[0].Nodes, []int{0, 1, 2, 3}) {
		t.Fatalf("plan %+v, want node 3's share rebuilt onto node 3", acts)
	}
	delete(invs, 3)
	acts = plan(3, invs)
	if len(acts) != 1 || acts[0].Kind != actDegrade || !strings.Contains(acts[0].Reason, "node 0 holds the shares of two members") {
		t.Fatalf("plan %+v", acts)
	}
}

// The newest revision of a record decides: a share rebuilt onto a
// replacement is found on the replacement, not sought from the identity
// that was lost; and the nodes that hold an older revision (they missed
// the rebuild's outcome) are sent the newest, or their mounts would look
// for the share at the lost identity's old index, in a job of another
// order another node.
func TestPlanNewestRevisionDecides(t *testing.T) {
	old := rec("c", 1, "xor", 0, 0)
	moved := movedRecord(old, 0, map[int]string{2: "new2"})
	invs := own(old, []int{2})
	invs[0] = inv(0, "", has(moved, "id0"))
	invs[2] = inv(2, "new2", has(moved, "id2"))
	acts := plan(4, invs)
	if len(acts) != 1 || acts[0].Kind != actRevise || acts[0].Dataset.Record != moved || !slices.Equal(acts[0].To, []int{0, 1, 2, 3}) {
		t.Fatalf("plan %+v, want the newest record sent to every node", acts)
	}
	for n := range invs {
		invs[n].Datasets[0].Record = moved
	}
	if acts := plan(4, invs); len(acts) != 0 {
		t.Fatalf("plan %+v once every node holds the newest record, want nothing", acts)
	}
}

// TestPlanLaterFetchDecides: a job without node 3 fetched the dataset
// from the prefix onto wiped caches (new identities f0…f2) and protected
// it anew; node 3 returns holding the first encoding, whose record
// rebuilds had taken to revision 3. The fetched copy is the dataset now:
// nothing is lost, node 3 is shown it.
func TestPlanLaterFetchDecides(t *testing.T) {
	first := rec("c", 1, "rs", 2, 0)
	first.Rev = 3
	fetched := rec("c", 1, "rs", 2, 0)
	fetched.Members = fetched.Members[:3]
	for n := range fetched.Members {
		fetched.Members[n].ID = fmt.Sprintf("f%d", n)
	}
	fetched.Rev, fetched.Fetched = 1, first.Completed.Add(time.Minute)
	invs := map[int]*inventoryMsg{3: inv(3, "", has(first, "id3"))}
	for n := range 3 {
		id := fmt.Sprintf("f%d", n)
		invs[n] = inv(n, id, has(fetched, id))
	}
	acts := plan(4, invs)
	for _, a := range acts {
		if a.Kind != actView || a.Dataset.Record != fetched || !slices.Equal(a.To, []int{3}) {
			t.Fatalf("plan %+v, want only node 3 shown the fetched copy", acts)
		}
	}
	if len(acts) != 1 {
		t.Fatalf("plan %+v, want node 3 shown the fetched copy", acts)
	}
}

// TestPlanNeverProtectedOnlyWithEvidence: "never protected" is said of a
// dataset whose members' files are here without redundancy data; of one
// of which no node that answered holds anything (its shares went with
// wiped caches, or sit on nodes away) it is not known, and not said.
func TestPlanNeverProtectedOnlyWithEvidence(t *testing.T) {
	r := rec("c", 1, "xor", 0, 0)
	invs := map[int]*inventoryMsg{}
	for n := range 4 {
		invs[n] = inv(n, fmt.Sprintf("new%d", n), has(r)) // every cache replaced: the record, no share
	}
	acts := plan(4, invs)
	if len(acts) == 0 || acts[0].Kind != actFail || strings.Contains(acts[0].Reason, "never protected") || !strings.Contains(acts[0].Reason, "tolerates") {
		t.Fatalf("plan %+v, want c failed for losing more than xor tolerates", acts)
	}
	invs = own(r, nil, 0, 1, 2, 3) // every member's files here, no redundancy
	invs[3] = inv(3, "new3", has(r))
	acts = plan(4, invs)
	if len(acts) == 0 || acts[0].Kind != actFail || !strings.Contains(acts[0].Reason, "never protected") {
		t.Fatalf("plan %+v, want c failed as never protected, node 3's share gone", acts)
	}
}

// TestPlanMovedHolderAway: shares rebuilt onto holders that are not in
// this job are not named by the index their members wrote under (nodes
// now in another role): the reason says they are on no node that
// answered.
func TestPlanMovedHolderAway(t *testing.T) {
	r := movedRecord(rec("c", 1, "xor", 0, 0), 0, map[int]string{0: "h0", 1: "h1"})
	invs := map[int]*inventoryMsg{0: inv(0, "new0", has(r)), 1: inv(1, "new1", has(r))}
	for n := 2; n < 4; n++ {
		id := fmt.Sprintf("id%d", n)
		invs[n] = inv(n, "", has(r, id))
	}
	acts := plan(4, invs)
	if len(acts) == 0 || acts[0].Kind != actFail || !strings.Contains(acts[0].Reason, "the members nodes 0, 1 wrote (on no node that answered)") {
		t.Fatalf("plan %+v, want c failed, its moved shares on no node that answered", acts)
	}
}

func TestPlanNewestFirst(t *testing.T) {
	older, newer := rec("old", 1, "xor", 0, 0), rec("new", 2, "xor", 0, 0)
	invs := map[int]*inventoryMsg{}
	for n := range 4 {
		id := fmt.Sprintf("id%d", n)
		invs[n] = inv(n, "", has(older, id+"!"), has(newer, id+"!"))
	}
	acts := plan(4, invs)
	if len(acts) != 2 || acts[0].Dataset.Name != "new" || acts[1].Dataset.Name != "old" {
		t.Fatalf("order %+v", acts)
	}
}

// A replacement (a wiped node, a new identity at the same index) plays the
// lost member's rank itself.
func TestPlanReplacementPlaysItsRank(t *testing.T) {
	invs := own(rec("c", 1, "xor", 0, 0), []int{2})
	invs[2] = inv(2, "new2")
	acts := plan(4, invs)
	if len(acts) != 1 || !slices.Equal(acts[0].Nodes, []int{0, 1, 2, 3}) {
		t.Fatalf("plan %+v", acts)
	}
}

// TestPlanEvictedIsNotLost: nodes that hold none of an older dataset while
// they hold cache_size newer ones evicted it; the others still hold it
// (pinned by a flush, or killed before their eviction). Nothing is
// rebuilt or failed: the dataset is leaving the caches, not lost. Without
// the newer ones, the same absence is a loss.
func TestPlanEvictedIsNotLost(t *testing.T) {
	invs := evictedOnTwo(rec("c1", 1, "xor", 0, 0), rec("c2", 2, "xor", 0, 0), rec("c3", 3, "xor", 0, 0))
	if acts := plan(4, invs); len(acts) != 0 {
		t.Fatalf("plan %+v, want nothing: c1 is past the cache size", acts)
	}
	for n := range 4 {
		invs[n].CacheSize = 3
	}
	acts := plan(4, invs)
	if len(acts) != 1 || acts[0].Dataset.Name != "c1" || acts[0].Kind != actFail || !strings.Contains(acts[0].Reason, "nodes 0, 1") {
		t.Fatalf("plan %+v, want c1 failed with nodes 0 and 1 lost: within a cache of 3 they should hold it", acts)
	}
}

// TestPlanEvictedOnASharedSequence: a node 0 that lost its ledger while
// the nodes holding the newest sequence were away hands that number out
// again, so two datasets share it. The stores evict the one node 0
// recorded earlier, and the plan, ordering by the same rule, judges it
// evicted too rather than lost.
func TestPlanEvictedOnASharedSequence(t *testing.T) {
	old, twin, newer := rec("c1", 5, "xor", 0, 0), rec("c2", 5, "xor", 0, 0), rec("c3", 6, "xor", 0, 0)
	twin.Completed = old.Completed.Add(time.Second)
	if cache.CompareAge(invDataset{Name: "c1", Record: old}.age(), invDataset{Name: "c2", Record: twin}.age()) >= 0 {
		t.Fatalf("c1 (recorded at %v) is not older than c2 (at %v)", old.Completed, twin.Completed)
	}
	if acts := plan(4, evictedOnTwo(old, twin, newer)); len(acts) != 0 {
		t.Fatalf("plan %+v, want nothing: c1 is past the cache size", acts)
	}
}

// evictedOnTwo is a four-node job with a cache of 2 in which nodes 0 and
// 1 hold their shares of newer and newest only (they evicted old), and
// nodes 2 and 3 hold all three (a flush pins old there, or a kill came
// before their eviction).
func evictedOnTwo(old, newer, newest *record.Record) map[int]*inventoryMsg {
	invs := map[int]*inventoryMsg{}
	for n := range 4 {
		id := fmt.Sprintf("id%d", n)
		if n < 2 {
			invs[n] = inv(n, "", has(newer, id), has(newest, id))
		} else {
			invs[n] = inv(n, "", has(old, id), has(newer, id), has(newest, id))
		}
		invs[n].CacheSize = 2
	}
	return invs
}

// TestPlanPendingIsAway: a node that holds a dataset complete but has not
// got its record yet (restarted before it arrived) holds its share: the
// member is away until the record comes, never lost.
func TestPlanPendingIsAway(t *testing.T) {
	r := rec("c", 1, "xor", 0, 0)
	invs := own(r, []int{1}, 0, 2, 3) // never encoded; node 1 without the record
	invs[1] = inv(1, "")
	invs[1].Pending = []string{"c"}
	acts := plan(4, invs)
	if len(acts) != 1 || acts[0].Kind != actDegrade || !strings.Contains(acts[0].Reason, "node 1") {
		t.Fatalf("plan %+v, want c degraded, waiting for node 1", acts)
	}
}

// TestPlanEncodeCutOff: members whose redundancy file is missing or
// damaged but whose files are all there (an encode cut off by a kill) are
// not lost: beyond what a rebuild restores, the set encodes again (or
// waits for a member away), and only a member whose files are gone makes
// the dataset fail.
func TestPlanEncodeCutOff(t *testing.T) {
	dataOnly := func(invs map[int]*inventoryMsg, ns ...int) map[int]*inventoryMsg {
		for _, n := range ns {
			invs[n].Datasets[0].Shares[0].Data = true
		}
		return invs
	}
	xor, rs := rec("c", 1, "xor", 0, 0), rec("c", 1, "rs", 2, 0)
	tests := []struct {
		name   string
		invs   map[int]*inventoryMsg
		want   actionKind
		reason string
	}{
		{"xor, two cut off", dataOnly(own(xor, nil, 0, 1), 0, 1), actProtect, ""},
		{"rs, three cut off", dataOnly(own(rs, nil, 0, 1, 2), 0, 1, 2), actProtect, ""},
		{"xor, two cut off, one of them corrupt", dataOnly(own(xor, nil, 0, 1), 0), actFail, "nodes 0, 1"},
		{"xor, two cut off, one away", dataOnly(own(xor, []int{3}, 0, 1), 0, 1), actDegrade, "waits for node 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acts := plan(4, tt.invs)
			if len(acts) != 1 || acts[0].Kind != tt.want || !strings.Contains(acts[0].Reason, tt.reason) {
				t.Fatalf("plan %+v, want %s saying %q", acts, tt.want, tt.reason)
			}
		})
	}
	// One gone with its files: no encoding brings them back.
	invs := dataOnly(own(xor, []int{2}, 0), 0)
	invs[2] = inv(2, "new2")
	if acts := plan(4, invs); len(acts) != 1 || acts[0].Kind != actFail {
		t.Fatalf("plan %+v, want c failed: node 2's files are gone and node 0's redundancy too", acts)
	}
}

// TestPlanIntactButComplete: a node killed between writing its redundancy
// file and recording the dataset protected holds it complete; every
// member being intact, the set is protected: it stayed complete there.
func TestPlanIntactButComplete(t *testing.T) {
	for _, st := range []cache.State{cache.Complete, cache.Recorded} {
		invs := own(rec("c", 1, "xor", 0, 0), nil)
		invs[0].Datasets[0].State = st
		if acts := plan(4, invs); len(acts) != 1 || acts[0].Kind != actClear || !slices.Equal(acts[0].To, []int{0, 1, 2, 3}) {
			t.Fatalf("%s: plan %+v, want c cleared on every node", st, acts)
		}
	}
}

// TestPlanKeptServedAgain: nodes 0 and 1 failed the dataset while nodes 2
// and 3 were away (a job restarted on two nodes) and kept their files;
// back with every node, every member is intact: the kept copies are
// served again first, then the set is protected on every node.
func TestPlanKeptServedAgain(t *testing.T) {
	r := rec("c", 1, "xor", 0, 0)
	invs := own(r, nil)
	for _, n := range []int{0, 1} {
		invs[n].Datasets[0].State = cache.Failed
	}
	acts := plan(4, invs)
	if len(acts) != 2 || acts[0].Kind != actRevive || !slices.Equal(acts[0].To, []int{0, 1}) ||
		acts[1].Kind != actClear || !slices.Equal(acts[1].To, []int{0, 1, 2, 3}) {
		t.Fatalf("plan %+v, want c revived on nodes 0 and 1, then cleared everywhere", acts)
	}
	// A member away: it cannot be verified yet, and stays failed, kept.
	invs3 := own(r, []int{3})
	for _, n := range []int{0, 1} {
		invs3[n].Datasets[0].State = cache.Failed
	}
	if acts := plan(4, invs3); slices.ContainsFunc(acts, func(a action) bool { return a.Kind == actRevive || a.Kind == actView }) {
		t.Fatalf("plan %+v, want c kept while node 3 is away", acts)
	}
	// Still beyond what XOR tolerates: it fails again, kept, and nothing
	// is served.
	delete(invs, 2)
	delete(invs, 3)
	acts = plan(2, invs)
	if len(acts) != 1 || acts[0].Kind != actFail || !strings.Contains(acts[0].Reason, "the members nodes 2, 3 wrote (on no node that answered)") {
		t.Fatalf("plan %+v, want c failed again, naming the members not in the job", acts)
	}
}

// TestPlanReturningNodeShown: a dataset completed by nodes 0-2 while node
// 3 was away is shown on node 3, as protected as the others hold it, and
// a node that evicted it by the cache size is not shown it again.
func TestPlanReturningNodeShown(t *testing.T) {
	r := rec("c", 5, "xor", 0, 0)
	r.Members = r.Members[:3]
	invs := map[int]*inventoryMsg{3: inv(3, "")}
	for n := range 3 {
		invs[n] = inv(n, "", has(r, fmt.Sprintf("id%d", n)))
	}
	acts := plan(4, invs)
	if len(acts) != 1 || acts[0].Kind != actView || !slices.Equal(acts[0].To, []int{3}) || acts[0].Reason != "" {
		t.Fatalf("plan %+v, want c shown on node 3, protected", acts)
	}
	newer := func(name string, seq uint64) held { return has(rec(name, seq, "xor", 0, 0), "id3") }
	invs[3] = inv(3, "", newer("d", 6), newer("e", 7))
	for _, m := range invs {
		m.CacheSize = 2
	}
	if acts := plan(4, invs); slices.ContainsFunc(acts, func(a action) bool { return a.Dataset.Name == "c" }) {
		t.Fatalf("plan %+v, want nothing of c: node 3 evicted it", acts)
	}
}

// TestPlanNamesNodesOfThisJob: a job restarted with its nodes in another
// order names a member by its node's index now, not the index it wrote
// it under ("node 2 unreachable" while node 2 is up was wrong).
func TestPlanNamesNodesOfThisJob(t *testing.T) {
	r := rec("c", 1, "xor", 0, 0)
	// The caches of nodes 2 and 3 swapped places; node 2 (id3 now) is up,
	// node 3 (id2) away.
	invs := map[int]*inventoryMsg{
		0: inv(0, "", has(r, "id0")),
		1: inv(1, "", has(r, "id1")),
		2: inv(2, "id3", has(r, "id3")),
	}
	acts := plan(4, invs)
	if len(acts) != 1 || acts[0].Kind != actDegrade || acts[0].Reason != "the member node 2 wrote (on no node that answered) unreachable; rebuild waits for it" {
		t.Fatalf("plan %+v, want c degraded waiting for the member node 2 wrote, not naming node 2, which is up", acts)
	}
}

// TestPlanRecordedAnew: node 0 alone fetched c from the prefix and the job
// of one node recorded it anew (SINGLE, a member of its own); back on four
// nodes, the others' shares of the older record are no longer the job's:
// they are shown c as node 0 holds it.
func TestPlanRecordedAnew(t *testing.T) {
	old := rec("c", 5, "rs", 2, 0)
	anew := &record.Record{Version: record.Version, Dataset: "c", Kind: "dir", Root: "c", Seq: 5, Rev: 1,
		Scheme: record.Scheme{Kind: "single", Sets: 1}, Members: []record.Member{{Node: 0, ID: "id0"}}}
	invs := map[int]*inventoryMsg{0: inv(0, "", held{rec: anew, shares: []string{"id0"}, state: cache.Recorded})}
	for n := 1; n < 4; n++ {
		invs[n] = inv(n, "", held{rec: old, shares: []string{fmt.Sprintf("id%d", n)}, state: cache.Degraded})
	}
	acts := plan(4, invs)
	if len(acts) != 1 || acts[0].Kind != actView || !slices.Equal(acts[0].To, []int{1, 2, 3}) || acts[0].Dataset.Record != anew {
		t.Fatalf("plan %+v, want c shown on nodes 1-3 as node 0 recorded it", acts)
	}
}
