package redundancy

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/schemes"
)

// heldShare is one member's share of a dataset that a node holds: its own,
// or one rebuilt onto it for a member whose node is gone.
type heldShare struct {
	Member  string `json:"member"` // the member's identity
	Intact  bool   `json:"intact"` // its redundancy file and files verified (schemes.Inspect)
	Problem string `json:"problem,omitempty"`
	// Data, when not Intact: the member's files are there as its record
	// lists them; only its redundancy data is missing or damaged (an
	// encode cut off), so the set can encode again rather than lose it.
	Data bool `json:"data,omitempty"`
}

// invDataset is what a node says about one recorded dataset it holds.
type invDataset struct {
	Name   string         `json:"name"`
	Kind   cache.Kind     `json:"kind"`
	Root   string         `json:"root"`
	State  cache.State    `json:"state"`
	Record *record.Record `json:"record"`
	Shares []heldShare    `json:"shares"`
}

// check refuses a dataset whose name, route or record a peer made up.
func (i invDataset) check() error {
	if err := layout.CheckRoute(i.Name, string(i.Kind), i.Root); err != nil {
		return err
	}
	if i.Record == nil {
		return fmt.Errorf("%s: no record", i.Name)
	}
	if err := i.Record.Check(); err != nil {
		return err
	}
	if i.Record.Dataset != i.Name {
		return fmt.Errorf("the record of %s is in the place of %s", i.Record.Dataset, i.Name)
	}
	return nil
}

func (i invDataset) route() cache.Route { return cache.Route{Name: i.Name, Kind: i.Kind, Root: i.Root} }

// age places the dataset among the others as every node's cache does.
func (i invDataset) age() cache.Age {
	return cache.Age{Completed: i.Record.Completed, Seq: i.Record.Seq, Name: i.Name}
}

// inventoryMsg is a node's answer to the stock-taking coordinator.
type inventoryMsg struct {
	Node     int          `json:"node"`
	ID       string       `json:"id"` // the node's identity (its cache's)
	Datasets []invDataset `json:"datasets"`
	// CacheSize is the node's datasets.cache_size: a recorded dataset it
	// does not hold, while it holds that many newer ones, it evicted.
	CacheSize int `json:"cache_size,omitempty"`
	// Pending names the datasets complete here whose record has not
	// reached this node yet (it restarted before it did; its join brings
	// it): its share of them is here, just not verifiable yet.
	Pending []string `json:"pending,omitempty"`
}

// evicted says whether the node evicted dataset d by the cache size: it
// holds none of it and at least CacheSize recorded datasets newer (kept
// failed ones do not count, as they do not in the cache).
func (m *inventoryMsg) evicted(d invDataset) bool {
	if m.CacheSize < 1 {
		return false
	}
	newer := 0
	for _, o := range m.Datasets {
		if o.Name == d.Name {
			return false
		}
		if cache.CompareAge(o.age(), d.age()) > 0 && o.State != cache.Failed {
			newer++
		}
	}
	return newer >= m.CacheSize
}

// actionKind is what the job does with one set of a dataset.
type actionKind string

const (
	actRebuild actionKind = "rebuild" // restore the lost members from the others
	actFail    actionKind = "fail"    // beyond what the scheme tolerates: fail it everywhere
	actDegrade actionKind = "degrade" // recoverable, but a member is not here to take part
	actProtect actionKind = "protect" // recorded everywhere but never encoded: encode it
	actClear   actionKind = "clear"   // every member intact again: protected, no longer degraded
	actRevise  actionKind = "revise"  // a newer record (a rebuilt share's new holder): keep it
	actRevive  actionKind = "revive"  // failed and kept, and its members are back: serve it again
	actView    actionKind = "view"    // completed while the node was away, or written by others: show it
)

// Where a dataset's revive and view come among its actions: the nodes
// holding it kept serve it again before anything else is done with it
// (they hold shares a rebuild reads), and nodes that hold no share of it
// are told last, once a rebuild has said who holds what.
const (
	setRevive = -2
	setView   = 1 << 30
)

// action is the plan for one redundancy set of one dataset.
type action struct {
	Dataset invDataset // its Record is the newest any node holds
	Set     int
	Kind    actionKind
	// Nodes are the nodes that play each rank (a rebuild; a node may play
	// two, its own and one it hosts), Lost the ranks restored.
	Nodes  []int
	Lost   []int
	Reason string
	// To are the nodes the action concerns.
	To []int
	// Holders are the nodes that hold any of the dataset (a share, a
	// kept copy, or only its record).
	Holders []int
}

// memberStatus is where a member's share stands.
type memberStatus int

const (
	missing     memberStatus = iota // no answering node holds it, and every node answered: gone
	intact                          // held and verified
	damaged                         // held, but not verifiable (corrupt, or never encoded)
	unreachable                     // no answering node holds it, and some node did not answer
)

// plan decides, from every answering node's inventory (by node index) in a
// job of nodes, what happens to every recorded dataset any of them holds,
// set by set, under the dataset's record — never today's configuration.
// Every node follows the plan, so it is computed in one place.
func plan(nodes int, invs map[int]*inventoryMsg) []action {
	newest := map[string]invDataset{}
	holders := map[string]map[string][]holding{} // dataset → member → holdings
	pending := map[string]map[string]bool{}      // dataset → identities whose record is on its way
	on := map[string][]int{}                     // dataset → nodes holding any of it
	shares := map[string]map[int][]string{}      // dataset → node → the members whose shares it holds
	kept := map[string][]int{}                   // dataset → nodes holding it failed, its files kept
	degraded := map[string]map[int]bool{}        // dataset → nodes holding it degraded
	ids := map[int]string{}
	recs := map[string]map[int]*record.Record{} // dataset → node → its record of it
	for n, inv := range invs {
		ids[n] = inv.ID
		for _, name := range inv.Pending {
			if pending[name] == nil {
				pending[name] = map[string]bool{}
			}
			pending[name][inv.ID] = true
		}
		for _, d := range inv.Datasets {
			if cur, ok := newest[d.Name]; !ok || d.Record.Newer(cur.Record) {
				newest[d.Name] = d
			}
			if recs[d.Name] == nil {
				recs[d.Name] = map[int]*record.Record{}
			}
			recs[d.Name][n] = d.Record
			if holders[d.Name] == nil {
				holders[d.Name], degraded[d.Name], shares[d.Name] = map[string][]holding{}, map[int]bool{}, map[int][]string{}
			}
			for _, s := range d.Shares {
				holders[d.Name][s.Member] = append(holders[d.Name][s.Member], holding{node: n, id: inv.ID, intact: s.Intact, data: s.Intact || s.Data})
				shares[d.Name][n] = append(shares[d.Name][n], s.Member)
			}
			on[d.Name] = append(on[d.Name], n)
			if d.State == cache.Failed {
				kept[d.Name] = append(kept[d.Name], n)
			}
			// Degraded, failed and kept, or recorded and never marked
			// protected although its redundancy may be whole (a node
			// killed between writing its redundancy file and recording
			// the state): once every member is intact, it is protected.
			if d.State == cache.Degraded || d.State == cache.Complete || d.State == cache.Recorded || d.State == cache.Failed {
				degraded[d.Name][n] = true
			}
		}
	}
	everyone := len(invs) == nodes
	var out []action
	for name, d := range newest {
		if pastCacheSize(invs, d) {
			// A node holds none of it for holding newer ones: the dataset
			// is leaving the job's caches, not lost (the others evict it
			// as their pins let them); rebuilding or failing it would
			// only tell a wrong story.
			continue
		}
		rec := d.Record
		slices.Sort(on[name])
		slices.Sort(kept[name])
		// A node holds a share when it holds one of a member of the newest
		// record: shares of an older one (the dataset was recorded anew
		// since, fetched by a job without it) are no longer the job's.
		holds := map[int]bool{}
		for n, ms := range shares[name] {
			holds[n] = slices.ContainsFunc(ms, func(id string) bool { return rec.Member(id) != nil })
		}
		var free []int // nodes that hold no share of the dataset
		for _, n := range answered(invs) {
			if !holds[n] {
				free = append(free, n)
			}
		}
		names := memberNames(nodes, invs)
		var acts []action
		revised := rec
		for s := range rec.Scheme.Sets {
			set := rec.Set(s)
			status := make([]memberStatus, len(set))
			at := make([]int, len(set))
			data := make([]bool, len(set)) // the member's files are held, as recorded
			home := make([]bool, len(set)) // held by the member's own node
			moved := map[int]string{}      // rank → identity of its new holder
			for r, m := range set {
				hs := holders[name][m.ID]
				slices.SortFunc(hs, func(a, b holding) int { return a.rank(m) - b.rank(m) })
				switch {
				case len(hs) > 0 && hs[0].intact:
					status[r], at[r], data[r], home[r] = intact, hs[0].node, true, hs[0].id == m.ID
					if hs[0].id != m.HeldBy() {
						moved[r] = hs[0].id
					}
				case len(hs) > 0:
					status[r], at[r], data[r] = damaged, hs[0].node, hs[0].data
				case pending[name][m.HeldBy()]:
					// Its node holds it complete, the record not there
					// yet: away, not lost, until it is.
					status[r], at[r] = unreachable, -1
				case everyone:
					status[r], at[r] = missing, -1
				default:
					status[r], at[r] = unreachable, -1
				}
			}
			anyDegraded := false
			for _, n := range on[name] {
				anyDegraded = anyDegraded || degraded[name][n]
			}
			if len(moved) > 0 {
				// A member's own node is back with its share intact (or its
				// recorded holder lost it while another copy survives): the
				// record follows where the share is.
				revised = movedRecord(revised, s, moved)
			}
			for _, a := range decide(rec, s, set, status, data, at, home, free, anyDegraded, names) {
				switch a.Kind {
				case actFail:
					a.To = answered(invs)
				case actRebuild:
					a.To = distinct(a.Nodes)
				default:
					a.To = on[name]
				}
				acts = append(acts, a)
			}
		}
		// A node holding a share that missed a revision (it restarted
		// before the outcome of a rebuild reached it) would look for
		// another share where it no longer is: it gets the newest record
		// too. (One holding only shares of an older recording is shown
		// the dataset instead: reviveAndView.)
		stale := false
		for n, r := range recs[name] {
			stale = stale || (holds[n] && rec.Newer(r))
		}
		if revised != rec || stale {
			acts = append(acts, action{Kind: actRevise, Set: -1, To: answered(invs)})
		}
		acts = append(acts, reviveAndView(acts, invs, d, kept[name], holds)...)
		for i := range acts {
			acts[i].Dataset = d
			acts[i].Dataset.Record = revised
			acts[i].Holders = on[name]
		}
		out = append(out, acts...)
	}
	slices.SortFunc(out, func(a, b action) int {
		return cmp.Or(cache.CompareAge(b.Dataset.age(), a.Dataset.age()), cmp.Compare(a.Set, b.Set))
	})
	return out
}

// reviveAndView returns what the nodes that hold dataset d kept (failed)
// and those that hold no share of it do, given the actions acts planned
// for its sets: the kept copies are served again once every member is
// there to verify it (not when it fails again, nor while a member is
// away: it stays failed and kept, and its reason stands), and every
// answering node that holds no share of it (it completed while the node
// was away, or in a job without the node) shows it, in the state the
// others hold it in — unless the node evicted it by the cache size, or
// nobody serves it.
func reviveAndView(acts []action, invs map[int]*inventoryMsg, d invDataset, kept []int, shares map[int]bool) []action {
	reason := ""
	var rebuilt []int
	for _, a := range acts {
		switch a.Kind {
		case actFail:
			return nil
		case actDegrade:
			if len(kept) > 0 {
				return nil
			}
			reason = a.Reason
		case actRebuild:
			rebuilt = append(rebuilt, a.Nodes...)
		}
	}
	var out []action
	if len(kept) > 0 {
		out = append(out, action{Kind: actRevive, Set: setRevive, To: kept})
	}
	var viewers []int
	for _, n := range answered(invs) {
		if !shares[n] && !slices.Contains(rebuilt, n) && !invs[n].evicted(d) && !slices.Contains(invs[n].Pending, d.Name) {
			viewers = append(viewers, n)
		}
	}
	if len(viewers) > 0 {
		out = append(out, action{Kind: actView, Set: setView, To: viewers, Reason: reason})
	}
	return out
}

// pastCacheSize says whether an answering node evicted dataset d.
func pastCacheSize(invs map[int]*inventoryMsg, d invDataset) bool {
	for _, inv := range invs {
		if inv.evicted(d) {
			return true
		}
	}
	return false
}

// holding is a node's copy of a member's share.
type holding struct {
	node   int
	id     string // the node's identity
	intact bool
	data   bool // the member's files are there (intact, or only its redundancy damaged)
}

// rank orders the copies of member m's share, best first: intact before
// damaged; then the member's own node, the holder its record names, and
// the lowest node.
func (h holding) rank(m *record.Member) int {
	r := h.node
	switch h.id {
	case m.ID:
		r -= 2 << 20
	case m.HeldBy():
		r -= 1 << 20
	}
	if !h.intact {
		r += 4 << 20
	}
	return r
}

// decide plans one set of a dataset from its members' statuses (by rank),
// the nodes that hold them and the nodes that hold nothing of the dataset. Only members whose shares nobody holds
// while every node answered, or whose copies are damaged, count as lost: a
// member a node that did not answer may hold is away, and while one is away
// the dataset is kept and degraded, never failed on its account.
func decide(rec *record.Record, s int, set []*record.Member, status []memberStatus, data []bool, at []int, home []bool, free []int, degraded bool, names namer) []action {
	one := func(k actionKind, reason string) []action { return []action{{Set: s, Kind: k, Reason: reason}} }
	var lost, away, gone []int
	anyIntact := false
	for r, st := range status {
		switch st {
		case intact:
			anyIntact = true
		case damaged:
			lost = append(lost, r)
		case missing:
			lost, gone = append(lost, r), append(gone, r)
		case unreachable:
			away = append(away, r)
		}
	}
	if !anyIntact && len(lost) > len(gone) {
		// Members' files are here, with no redundancy data anywhere: it
		// was never (fully) encoded. (With nothing of it on any node that
		// answered, that is not known: the shares are judged below.)
		switch {
		case len(gone) == 0 && len(away) == 0:
			return one(actProtect, "")
		case len(gone) > 0:
			return one(actFail, "never protected, and the shares of "+names.list(set, gone)+" are gone")
		default:
			return one(actDegrade, "never protected; waiting for "+names.list(set, away))
		}
	}
	p, err := paramsOf(rec, len(set))
	if err == nil && len(lost) > 0 {
		err = p.CanRebuild(lost)
	}
	if err != nil && len(gone) == 0 && allHeld(data, status) {
		// Beyond a rebuild, but every member's files are here (or on a
		// node that is away): only redundancy data is missing, encodes
		// cut off. Encode again, once everyone is here.
		if len(away) > 0 {
			return one(actDegrade, "its redundancy data is incomplete; encoding again waits for "+names.list(set, away))
		}
		return one(actProtect, "")
	}
	if err != nil {
		return one(actFail, fmt.Sprintf("lost the shares of %s, more than %s tolerates", names.list(set, lost), rec.Scheme.Kind))
	}
	switch {
	case len(away) > 0 && len(lost) > 0:
		return one(actDegrade, "lost the shares of "+names.list(set, lost)+"; the rebuild waits for "+names.list(set, away)+" (unreachable)")
	case len(away) > 0:
		return one(actDegrade, names.list(set, away)+" unreachable; rebuild waits for it")
	case len(lost) > 0:
		return []action{{Set: s, Kind: actRebuild, Lost: lost, Nodes: hosts(set, status, at, free)}}
	}
	if doubled := hostedTwice(at); doubled != "" {
		if a, ok := unhost(p, set, status, at, home, free); ok {
			a.Set = s
			return []action{a}
		}
		return one(actDegrade, doubled)
	}
	if degraded && p.Kind != schemes.Single { // SINGLE is never protected: it stays recorded
		return one(actClear, "")
	}
	return nil
}

// unhost plans, for a set every member of which is intact but where a
// node holds the shares of two (the job ran on fewer nodes, and the node
// that wrote one was wiped since), a rebuild of the hosted shares onto
// nodes of the job that hold no share of the dataset — one each, as many
// as there are — so that the set is protected again, each share on a node
// of its own. The hosts drop their copies once the record says who holds
// them (dropUnheld).
func unhost(p schemes.Params, set []*record.Member, status []memberStatus, at []int, home []bool, free []int) (action, bool) {
	plays := map[int]int{}
	for _, n := range at {
		plays[n]++
	}
	var lost []int
	st := slices.Clone(status)
	for r := range set {
		if plays[at[r]] > 1 && !home[r] && len(lost) < len(free) {
			lost = append(lost, r)
			st[r] = missing
		}
	}
	if len(lost) == 0 || p.CanRebuild(lost) != nil {
		return action{}, false
	}
	return action{Kind: actRebuild, Lost: lost, Nodes: hosts(set, st, at, free)}, true
}

// allHeld says whether every member's files are held, but for members
// on nodes that did not answer.
func allHeld(data []bool, status []memberStatus) bool {
	for r, ok := range data {
		if !ok && status[r] != unreachable {
			return false
		}
	}
	return true
}

// hostedTwice says which node holds the shares of two members of a set
// (the job restarted on fewer nodes), or "".
func hostedTwice(nodes []int) string {
	seen := map[int]bool{}
	for _, n := range nodes {
		if seen[n] {
			return fmt.Sprintf("node %d holds the shares of two members of the set (a node of the job is gone): "+
				"losing it would lose both; checkpoints written from now on use the job's nodes as they are", n)
		}
		seen[n] = true
	}
	return ""
}

// hosts returns the node that plays each rank of a rebuild: a member's
// holder; for a member whose share nobody holds any more, a node of the job
// that holds nothing of the dataset (free, in order; the node of the
// member's recorded index first) — a replacement — else the node holding
// the nearest intact member to its right in the set (rank r+1, r+2, …):
// the documented rule by which a job restarted on fewer nodes keeps a lost
// node's files.
func hosts(set []*record.Member, status []memberStatus, at []int, free []int) []int {
	out := slices.Clone(at)
	free = slices.Clone(free)
	for r, st := range status {
		if st != missing {
			continue
		}
		if len(free) > 0 {
			i := max(slices.Index(free, set[r].Node), 0)
			out[r] = free[i]
			free = slices.Delete(free, i, i+1)
			continue
		}
		for d := 1; d < len(status); d++ {
			if q := (r + d) % len(status); status[q] == intact {
				out[r] = at[q]
				break
			}
		}
	}
	return out
}

// answered returns the nodes that answered, in order.
func answered(invs map[int]*inventoryMsg) []int {
	out := make([]int, 0, len(invs))
	for n := range invs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func distinct(ns []int) []int {
	out := slices.Clone(ns)
	slices.Sort(out)
	return slices.Compact(out)
}

// namer names the members of a set by the nodes of this job, which are
// not always the nodes that wrote them: the job may run on another node
// list, in another order, with a node wiped. The zero namer names every
// member by the index of the node that wrote it.
type namer struct {
	nodes int            // nodes in the job
	at    map[string]int // identity → index of the answering node of that identity
	id    map[int]string // index → identity of the node that answered there
}

// memberNames is the namer of a stock-taking of a job of nodes.
func memberNames(nodes int, invs map[int]*inventoryMsg) namer {
	nm := namer{nodes: nodes, at: map[string]int{}, id: map[int]string{}}
	for n, inv := range invs {
		nm.at[inv.ID], nm.id[n] = n, inv.ID
	}
	return nm
}

// index returns the index in this job of the node of member m of set:
// the node that holds its share or has its identity; else the index it
// wrote it under, unless that index now belongs to a node of another
// member of the set (the job runs in another order), lies beyond the job,
// or its share was rebuilt onto another holder: then -1, its node is not
// known.
func (nm namer) index(set []*record.Member, m *record.Member) int {
	if nm.at == nil {
		return m.Node
	}
	for _, id := range []string{m.HeldBy(), m.ID} {
		if n, ok := nm.at[id]; ok {
			return n
		}
	}
	if m.Node >= nm.nodes || m.HeldBy() != m.ID {
		// Beyond the job, or rebuilt onto a holder that did not answer:
		// the index it wrote under says nothing of where its share is.
		return -1
	}
	if id, up := nm.id[m.Node]; up {
		for _, o := range set {
			if o != m && (o.ID == id || o.HeldBy() == id) {
				return -1
			}
		}
	}
	return m.Node
}

// list names the members of some ranks: "node 3" or "nodes 1, 4" by
// their index in this job (a node wiped or replaced at its index is still
// that node); members whose node is not known, by the index they wrote
// under: "the members nodes 5, 6 wrote (on no node that answered)".
func (nm namer) list(set []*record.Member, ranks []int) string {
	var here, gone []int
	for _, r := range ranks {
		if n := nm.index(set, set[r]); n >= 0 {
			here = append(here, n)
		} else {
			gone = append(gone, set[r].Node)
		}
	}
	var parts []string
	if len(here) > 0 {
		parts = append(parts, nodeList(here))
	}
	if len(gone) > 0 {
		s := "the member " + nodeList(gone) + " wrote (on no node that answered)"
		if len(gone) > 1 {
			s = "the members " + nodeList(gone) + " wrote (on no node that answered)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " and ")
}

// nodeList names node indices: "node 3" or "nodes 1, 4".
func nodeList(ns []int) string {
	ns = distinct(ns)
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = strconv.Itoa(n)
	}
	if len(names) == 1 {
		return "node " + names[0]
	}
	return "nodes " + strings.Join(names, ", ")
}

// rebuiltRecord revises a dataset's record for a rebuild of set s: a lost
// member's share is then held by the node that plays its rank (a
// replacement with a new identity, or a host), ids maps node indices to
// identities.
func rebuiltRecord(rec *record.Record, s int, lost, nodes []int, ids map[int]string) *record.Record {
	moved := map[int]string{}
	for _, r := range lost {
		moved[r] = ids[nodes[r]]
	}
	return movedRecord(rec, s, moved)
}

// movedRecord revises a dataset's record: the share of the member of each
// rank of set s in moved is held by the node of that identity now.
func movedRecord(rec *record.Record, s int, moved map[int]string) *record.Record {
	out := *rec
	out.Members = slices.Clone(rec.Members)
	out.Rev++
	for i := range out.Members {
		m := &out.Members[i]
		id, ok := moved[m.Rank]
		if m.Set != s || !ok {
			continue
		}
		m.Holder = id
		if m.Holder == m.ID {
			m.Holder = ""
		}
	}
	return &out
}
