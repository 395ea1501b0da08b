package redundancy

import (
	"testing"

	"github.com/scrfs/scrfs/cache"
)

// TestRebuildAttempts: every rank a node plays in the newest attempt (a
// host plays two) stays the newest until it ends; a rank of an attempt a
// newer one replaced here is superseded, its failure no longer the set's
// state, and its end leaves the newer attempt's progress in place.
func TestRebuildAttempts(t *testing.T) {
	p := &Protector{rebuilds: map[string]*rebuildRun{}}
	c := cache.Route{Name: "c"}
	a, b := p.track(c, "a1"), p.track(c, "a1")
	if a != b || !p.newest(a) {
		t.Fatal("two ranks of the only attempt are not one newest run")
	}
	p.untrack(a)
	if !p.newest(b) {
		t.Fatal("the second rank of the attempt looks superseded once the first ended")
	}
	p.untrack(b)
	old := p.track(c, "a2")
	cur := p.track(c, "a3")
	if p.newest(old) {
		t.Error("a rank of a replaced attempt is the newest")
	}
	p.untrack(old)
	if !p.newest(cur) || len(p.Rebuilding()) != 1 {
		t.Errorf("the replaced attempt's end took the newer one's entry: %v", p.Rebuilding())
	}
	p.untrack(cur)
	if len(p.rebuilds) != 0 {
		t.Errorf("rebuilds left after every rank ended: %v", p.rebuilds)
	}
}
