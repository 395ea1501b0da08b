package cache

import (
	"cmp"
	"time"
)

// Age places a recorded dataset among the job's others: every choice of
// "the newer" (what the cache size evicts, what a restart restores, what
// the stock-taking judges evicted) compares Ages, so that every node
// orders any two datasets alike.
type Age struct {
	Completed time.Time // when node 0 recorded it
	Seq       uint64    // the job's completion count
	Name      string
}

// Age returns where the dataset stands among the recorded ones.
func (i Info) Age() Age { return Age{Completed: i.Completed, Seq: i.Seq, Name: i.Name} }

// CompareAge orders a before b when b completed later: by the time node 0
// recorded it, then by sequence and by name. Time comes first because the
// sequence can go back: a node 0 that lost its ledger while the nodes
// holding the newest numbers were away counts on from what it can see, so
// a job restarted on fewer nodes numbers its new checkpoints below those
// of the history it left, whose holders may come back with them.
func CompareAge(a, b Age) int {
	return cmp.Or(a.Completed.Compare(b.Completed), cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Name, b.Name))
}

// compareCompletion orders completed datasets oldest first: recorded ones
// by Age, and those complete here but not recorded yet after them (they
// are newer than every recorded one) by this node's order of creation.
func compareCompletion(a, b Info) int {
	switch {
	case a.Seq == 0 && b.Seq == 0:
		return cmp.Compare(a.ID, b.ID)
	case a.Seq == 0 || b.Seq == 0:
		return cmp.Compare(b.Seq, a.Seq)
	}
	return CompareAge(a.Age(), b.Age())
}
