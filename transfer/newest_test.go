package transfer

import (
	"testing"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/prefix"
)

// TestNewerThanPrefix: the caches' newest checkpoint is kept over the
// prefix's when its sequence is not lower, or when it completed after the
// prefix's was flushed — a job restarted on fewer nodes, its node 0's
// ledger lost, numbers its checkpoints below those of the history it
// left, which the prefix may hold.
func TestNewerThanPrefix(t *testing.T) {
	at := time.Now().UTC()
	flushed := prefix.IndexEntry{Name: "old", ID: 140, Flushed: at}
	for _, c := range []struct {
		cached cache.Info
		want   bool
	}{
		{cache.Info{Name: "same", Seq: 140, Completed: at.Add(-time.Minute)}, true},
		{cache.Info{Name: "later", Seq: 141, Completed: at.Add(-time.Minute)}, true},
		{cache.Info{Name: "branch", Seq: 136, Completed: at.Add(time.Minute)}, true},
		{cache.Info{Name: "older", Seq: 136, Completed: at.Add(-time.Minute)}, false},
		{cache.Info{Name: "unknown flush time", Seq: 136, Completed: at.Add(time.Minute)}, false},
	} {
		e := flushed
		if c.cached.Name == "unknown flush time" {
			e.Flushed = time.Time{}
		}
		if got := newerThanPrefix(c.cached, e); got != c.want {
			t.Errorf("%s (seq %d): newer than the prefix's %v, want %v", c.cached.Name, c.cached.Seq, got, c.want)
		}
	}
}
