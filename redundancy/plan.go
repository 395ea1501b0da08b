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

// invDataset is what a member says about one completed dataset in its cache
// when its set takes stock after a restart.
type invDataset struct {
	Name    string      `json:"name"`
	Kind    cache.Kind  `json:"kind"`
	Root    string      `json:"root"`
	ID      uint64      `json:"id"`
	State   cache.State `json:"state"`
	Intact  bool        `json:"intact"` // redundancy file and files verified (schemes.Inspect)
	Problem string      `json:"problem,omitempty"`
	// Record is the job's record of the dataset as this member keeps it
	// (nil for a dataset completed before records existed).
	Record *record.Record `json:"record,omitempty"`
}

// check refuses a dataset whose name, route or record a peer made up.
func (i invDataset) check() error {
	if err := layout.CheckRoute(i.Name, string(i.Kind), i.Root); err != nil {
		return err
	}
	if i.Record == nil {
		return nil
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

// inventoryMsg is a member's answer to its coordinator.
type inventoryMsg struct {
	Node     int          `json:"node"`
	ID       string       `json:"id"` // the member's identity (its cache's)
	Datasets []invDataset `json:"datasets"`
}

// actionKind is what the set does with one dataset.
type actionKind string

const (
	actRebuild actionKind = "rebuild" // restore the lost members from the others
	actFail    actionKind = "fail"    // beyond what the scheme tolerates: drop it everywhere
	actDegrade actionKind = "degrade" // recoverable, but a lost member is not here to receive it
	actProtect actionKind = "protect" // complete everywhere but never encoded: encode it
	actClear   actionKind = "clear"   // every member intact again: protected, no longer degraded
)

// action is the plan for one dataset.
type action struct {
	Dataset invDataset
	Kind    actionKind
	Lost    []int  // ranks to rebuild (actRebuild)
	Reason  string // why (actFail, actDegrade)
}

// plan decides, from the members' inventories, what happens to every
// dataset any member holds, newest first. nodes[rank] is each member's node
// index; invs has an entry for every member that answered. Every member
// that answered follows the plan, so it is computed in one place.
func plan(p schemes.Params, nodes []int, invs map[int]*inventoryMsg) []action {
	type view struct {
		ds       invDataset
		status   []memberStatus // by rank
		degraded bool           // some member holds it degraded
	}
	views := map[string]*view{}
	for rank, node := range nodes {
		inv := invs[node]
		if inv == nil {
			continue
		}
		for _, ds := range inv.Datasets {
			v := views[ds.Name]
			if v == nil {
				v = &view{ds: ds, status: make([]memberStatus, len(nodes))}
				for r, n := range nodes {
					if invs[n] == nil {
						v.status[r] = unreachable
					}
				}
				views[ds.Name] = v
			}
			v.ds.ID = max(v.ds.ID, ds.ID)
			if ds.Record != nil && (v.ds.Record == nil || ds.Record.Newer(v.ds.Record)) {
				v.ds.Record = ds.Record
			}
			v.degraded = v.degraded || ds.State == cache.Degraded
			if ds.Intact {
				v.status[rank] = intact
			} else {
				v.status[rank] = damaged
			}
		}
	}
	var out []action
	for _, v := range views {
		if a, ok := decide(p, nodes, v.ds, v.status, v.degraded); ok {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b action) int { return cmp.Compare(b.Dataset.ID, a.Dataset.ID) })
	return out
}

// memberStatus is one member's copy of a dataset. The zero value is
// "missing": the member answered but does not have the dataset.
type memberStatus int

const (
	missing     memberStatus = iota
	intact                   // verified redundancy file and files
	damaged                  // present but not verifiable (corrupt, or never encoded)
	unreachable              // the member did not answer
)

// decide plans one dataset from its members' statuses. Only members that
// answered and lack the dataset (or hold it damaged) count as lost: a member
// that did not answer may come back with everything, so while one is away
// the dataset is kept and degraded, never failed on its account.
func decide(p schemes.Params, nodes []int, ds invDataset, status []memberStatus, degraded bool) (action, bool) {
	var lost, away []int
	anyIntact := false
	for r, s := range status {
		switch s {
		case intact:
			anyIntact = true
		case missing, damaged:
			lost = append(lost, r)
		case unreachable:
			away = append(away, r)
		}
	}
	a := action{Dataset: ds}
	if !anyIntact {
		// No redundancy data anywhere: it was never (fully) encoded.
		present := 0
		for _, s := range status {
			if s == damaged {
				present++
			}
		}
		switch {
		case present == len(status):
			a.Kind = actProtect
		case len(lost) > present:
			a.Kind, a.Reason = actFail, "never protected, and missing on "+nodeList(nodes, missingRanks(status))
		default:
			a.Kind, a.Reason = actDegrade, "never protected; waiting for "+nodeList(nodes, away)
		}
		return a, true
	}
	if err := p.CanRebuild(lost); len(lost) > 0 && err != nil {
		a.Kind = actFail
		a.Reason = fmt.Sprintf("lost on %s, more than %s tolerates", nodeList(nodes, lost), p.Kind)
		return a, true
	}
	switch {
	case len(away) > 0 && len(lost) > 0:
		// Rebuildable, but every member must take part and some are not here.
		a.Kind, a.Reason = actDegrade, "lost on "+nodeList(nodes, lost)+"; rebuild waits for "+nodeList(nodes, away)+" (unreachable)"
	case len(away) > 0:
		a.Kind, a.Reason = actDegrade, "member "+nodeList(nodes, away)+" unreachable; rebuild waits for it"
	case len(lost) > 0:
		a.Kind, a.Lost = actRebuild, lost
	case degraded:
		a.Kind = actClear
	default:
		return a, false
	}
	return a, true
}

func missingRanks(status []memberStatus) []int {
	var out []int
	for r, s := range status {
		if s == missing {
			out = append(out, r)
		}
	}
	return out
}

// nodeList names the nodes of some ranks: "node 3" or "nodes 1, 4".
func nodeList(nodes []int, ranks []int) string {
	slices.Sort(ranks)
	names := make([]string, len(ranks))
	for i, r := range ranks {
		names[i] = strconv.Itoa(nodes[r])
	}
	if len(names) == 1 {
		return "node " + names[0]
	}
	return "nodes " + strings.Join(names, ", ")
}
