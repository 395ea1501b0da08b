package cache

import (
	"context"
	"testing"
	"time"
)

// TestAwaitDecidedWhileProgressing: a restore that keeps making progress
// (a long fetch) keeps the mount waiting past DecideWait, and the wait ends
// at the decision; without progress it ends at DecideWait.
func TestAwaitDecidedWhileProgressing(t *testing.T) {
	const wait = 100 * time.Millisecond
	ts := newTestStore(t, Rules{}, 2, func(o *Options) { o.DecideWait = wait })

	returned := make(chan struct{})
	go func() {
		defer close(returned)
		ts.AwaitDecided(context.Background())
	}()
	// Progress for 4 times the bound, then decide.
	tick := time.NewTicker(wait / 4)
	defer tick.Stop()
	for end := time.Now().Add(4 * wait); time.Now().Before(end); <-tick.C {
		ts.Progressing()
		select {
		case <-returned:
			t.Fatal("the mount stopped waiting while the restore was making progress")
		default:
		}
	}
	ts.Decided()
	<-returned

	// A store whose restore makes no progress stops waiting at the bound;
	// an interrupted wait says so, for the mount to answer EINTR rather
	// than list what it holds before the job decided.
	ts2 := newTestStore(t, Rules{}, 2, func(o *Options) { o.DecideWait = wait })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ts2.AwaitDecided(ctx); err == nil {
		t.Fatal("an interrupted wait returned no error")
	}
	start := time.Now()
	if err := ts2.AwaitDecided(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < wait {
		t.Fatalf("the wait without progress ended after %v, before its bound %v", d, wait)
	}
}
