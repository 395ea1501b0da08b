package group

import (
	"context"
	"testing"

	"github.com/scrfs/scrfs/internal/testutil"
)

func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/internal/group.") }

func TestStopCancelsAndWaits(t *testing.T) {
	g := New(context.Background())
	started := make(chan struct{})
	finished := false
	if !g.Go(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		finished = true
	}) {
		t.Fatal("Go refused before Stop")
	}
	<-started
	g.Stop()
	if !finished {
		t.Fatal("Stop returned before the goroutine did")
	}
	if g.Go(func(context.Context) { t.Error("ran after Stop") }) {
		t.Fatal("Go accepted work after Stop")
	}
	g.Stop() // idempotent
}

func TestParentCancels(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	g := New(parent)
	done := make(chan struct{})
	g.Go(func(ctx context.Context) {
		<-ctx.Done()
		close(done)
	})
	cancel()
	<-done
	g.Stop()
}
