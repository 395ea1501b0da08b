package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/internal/testutil"
)

// Tests wait on what `scrfs status` reports, not on log lines, wherever a
// state exists: the control socket is asked (in process, so cheaply) until
// the dataset is where the test wants it.

// completedStates are the states of a dataset whose files are final.
var completedStates = []string{"complete", "protected", "degraded"}

// pollStatus asks the daemon for its status until ok holds, timeout
// passes or the daemon exits; it returns whether ok held and what it saw
// last. A status has no event to await: it is polled.
func (n *Node) pollStatus(timeout time.Duration, ok func(*control.Status) (bool, string)) (bool, string) {
	client := n.client()
	var done bool
	var last string
	testutil.Poll(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := client.Status(ctx)
		cancel()
		if err != nil {
			last = err.Error()
		} else if done, last = ok(st); done {
			last = ""
		}
		return done || n.hasExited()
	})
	return done, last
}

// client returns a control client of the daemon, to ask it in process:
// one per node, so its connections are kept and reused (a client per call
// left an idle connection behind each time).
func (n *Node) client() *control.Client {
	dir := n.ControlDir()
	n.ctlMu.Lock()
	defer n.ctlMu.Unlock()
	if n.ctl == nil || n.ctlDir != dir {
		n.ctl, n.ctlDir = control.NewClient(jobdir.Path{Base: filepath.Dir(dir), Names: []string{filepath.Base(dir)}}), dir
	}
	return n.ctl
}

// statusWithin asks the daemon for its status once, within timeout.
func (n *Node) statusWithin(timeout time.Duration) (*control.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return n.client().Status(ctx)
}

// poll is pollStatus for dataset name's row (nil when the node does not
// hold it); it returns the row once ok holds.
func (n *Node) poll(timeout time.Duration, name string, ok func(*control.Dataset) bool) (*control.Dataset, bool, string) {
	var row *control.Dataset
	reached, last := n.pollStatus(timeout, func(st *control.Status) (bool, string) {
		row = findRow(st, name)
		return ok(row), fmt.Sprintf("%+v", row)
	})
	return row, reached, last
}

// findRow returns dataset name's row among the held datasets, or among the
// failed ones, or nil.
func findRow(st *control.Status, name string) *control.Dataset {
	for _, rows := range [][]control.Dataset{st.Datasets, st.Failed} {
		for i := range rows {
			if rows[i].Name == name {
				return &rows[i]
			}
		}
	}
	return nil
}

// WaitDataset waits until ok holds for dataset name's row and returns it,
// failing the test after timeout with what it waited for (what) and saw.
func (n *Node) WaitDataset(timeout time.Duration, name, what string, ok func(*control.Dataset) bool) *control.Dataset {
	n.t.Helper()
	row, reached, last := n.poll(timeout, name, ok)
	if !reached {
		n.t.Fatalf("%s: %s %s not reached within %v (daemon exited: %v); last seen: %s\n%s",
			n.Mount, name, what, timeout, n.hasExited(), last, n.log.String())
	}
	return row
}

// inState is the condition of WaitState.
func inState(states []string) func(*control.Dataset) bool {
	return func(d *control.Dataset) bool { return d != nil && slices.Contains(states, d.State) }
}

// flushIn is the condition of WaitFlush.
func flushIn(st string, errHas []string) func(*control.Dataset) bool {
	return func(d *control.Dataset) bool {
		return d != nil && d.Flush != nil && d.Flush.State == st && containsAll(d.Flush.Error, errHas)
	}
}

// WaitState waits until dataset name is in one of states.
func (n *Node) WaitState(timeout time.Duration, name string, states ...string) *control.Dataset {
	n.t.Helper()
	return n.WaitDataset(timeout, name, "in state "+strings.Join(states, " or "), inState(states))
}

// WaitCompleted waits until dataset name's files are final here.
func (n *Node) WaitCompleted(timeout time.Duration, name string) *control.Dataset {
	n.t.Helper()
	return n.WaitState(timeout, name, completedStates...)
}

// WaitFlush waits until dataset name's flush is in state st here, with an
// error mentioning every part of errHas.
func (n *Node) WaitFlush(timeout time.Duration, name, st string, errHas ...string) *control.Dataset {
	n.t.Helper()
	return n.WaitDataset(timeout, name, "flush "+st+" "+strings.Join(errHas, " "), flushIn(st, errHas))
}

// waitAll waits until ok holds for dataset name on every node at once.
func (c *Cluster) waitAll(timeout time.Duration, name, what string, ok func(*control.Dataset) bool) {
	c.t.Helper()
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, reached, last := n.poll(timeout, name, ok); !reached {
				c.t.Errorf("%s: %s %s not reached within %v; last seen: %s", n.Mount, name, what, timeout, last)
			}
		}()
	}
	wg.Wait()
	if c.t.Failed() {
		c.t.FailNow()
	}
}

// WaitState waits until dataset name is in one of states on every node.
func (c *Cluster) WaitState(timeout time.Duration, name string, states ...string) {
	c.t.Helper()
	c.waitAll(timeout, name, "in state "+strings.Join(states, " or "), inState(states))
}

// WaitCompleted waits until dataset name's files are final on every node.
func (c *Cluster) WaitCompleted(timeout time.Duration, name string) {
	c.t.Helper()
	c.WaitState(timeout, name, completedStates...)
}

// WaitFlush waits until dataset name's flush is in state st on every node.
func (c *Cluster) WaitFlush(timeout time.Duration, name, st string) {
	c.t.Helper()
	c.waitAll(timeout, name, "flush "+st, flushIn(st, nil))
}

// WaitReady waits until the daemon reports ready: mounted, restored, and
// serving.
func (n *Node) WaitReady(timeout time.Duration) {
	n.t.Helper()
	reached, last := n.pollStatus(timeout, func(st *control.Status) (bool, string) {
		return st.Node.Ready, "not ready"
	})
	if !reached {
		n.t.Fatalf("%s: not ready within %v (daemon exited: %v): %s\n%s", n.Mount, timeout, n.hasExited(), last, n.log.String())
	}
	n.waitFreed()
}

// waitFreed waits until a killed run the kernel held (see Kill) is gone:
// the run started after it must have freed it.
func (n *Node) waitFreed() {
	n.t.Helper()
	if n.held == nil {
		return
	}
	select {
	case <-n.held:
		n.held = nil
	case <-time.After(40 * time.Second):
		n.t.Fatalf("%s: the killed run the kernel held is still there after the next start\n%s", n.Mount, n.log.String())
	}
}
