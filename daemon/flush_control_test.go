package daemon

import (
	"testing"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/transfer"
)

// TestFlushStatesAreTheABI: the control socket reports the cache's flush
// states by their names (flushABI), so every state the cache keeps must be
// one the CLI's JSON ABI defines (docs/cli.md).
func TestFlushStatesAreTheABI(t *testing.T) {
	for st, want := range map[cache.FlushState]string{
		cache.FlushScheduled: control.FlushScheduled,
		cache.FlushRunning:   control.FlushRunning,
		cache.FlushDone:      control.FlushDone,
		cache.FlushFailed:    control.FlushFailed,
	} {
		if got := flushABI(transfer.Progress{FlushStatus: cache.FlushStatus{State: st}}).State; got != want {
			t.Errorf("flush state %q reaches the control socket as %q, want %q", st, got, want)
		}
	}
}
