package redundancy

import "testing"

// TestRebuildAttempts: every rank a node plays in the newest attempt (a
// host plays two) ends as the newest; a rank of an attempt a newer one
// replaced here ends superseded, its failure no longer the set's state.
func TestRebuildAttempts(t *testing.T) {
	p := &Protector{rebuildAttempts: map[string]*attemptRun{}}
	p.rebuildBegan("c", "a1")
	p.rebuildBegan("c", "a1")
	if !p.rebuildEnded("c", "a1") || !p.rebuildEnded("c", "a1") {
		t.Fatal("a rank of the only attempt ended superseded")
	}
	p.rebuildBegan("c", "a2")
	p.rebuildBegan("c", "a3")
	if p.rebuildEnded("c", "a2") {
		t.Error("a rank of a replaced attempt ended as the newest")
	}
	if !p.rebuildEnded("c", "a3") {
		t.Error("the newest attempt's rank ended superseded")
	}
	if len(p.rebuildAttempts) != 0 {
		t.Errorf("attempts left after every rank ended: %v", p.rebuildAttempts)
	}
}
