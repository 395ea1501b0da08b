package names

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/scrfs/scrfs/internal/sleep"
	"github.com/scrfs/scrfs/jobnet"
)

// What the mount asks the owners, on the application's behalf: ctx is its
// request's, and every call is bounded by the member timeout as well.

// Create records entry e at path rel of writing dataset ds, created here,
// and returns it as it now stands: Holders lists every node that holds a
// copy (more than this one: another node created it first). An exclusive
// create of a file another node created, or a create of another type than
// the entry has, fails with ErrExists.
func (n *Names) Create(ctx context.Context, ds, rel string, e Entry, excl bool) (Entry, error) {
	return ask(ctx, n, rel, "create", n.serveCreate, createMsg{pathMsg: pathMsg{ds, rel}, Entry: e, Excl: excl})
}

// Lookup returns the entry at path rel of writing dataset ds that another
// node created, and counts this node among its holders: the caller makes
// its own copy of the name. ErrNotFound says no node created it.
func (n *Names) Lookup(ctx context.Context, ds, rel string) (Entry, error) {
	return ask(ctx, n, rel, "lookup", n.serveLookup, pathMsg{ds, rel})
}

// Remove removes entry rel of writing dataset ds job-wide: a directory
// only if no node holds an entry in it (else ErrNotEmpty). Every other
// holder removes its copy; the caller removes its own.
func (n *Names) Remove(ctx context.Context, ds, rel string, dir bool) error {
	if dir {
		in, err := n.List(ctx, ds, rel)
		if err != nil {
			return err
		}
		if len(in) > 0 {
			return fmt.Errorf("%s/%s holds %s: %w", ds, rel, sortedNames(in)[0], ErrNotEmpty)
		}
	}
	e, err := ask(ctx, n, rel, "remove", n.serveRemove, pathMsg{ds, rel})
	if err != nil {
		return err
	}
	n.tell(ctx, e.Holders, applyMsg{pathMsg: pathMsg{ds, rel}, Dir: dir})
	return nil
}

// Rename renames entry from of writing dataset ds to to, job-wide, replacing
// what was at to: every other holder of from renames its copy, and every
// other holder of what was at to (and of nothing at from) removes it. The
// caller renames its own. A directory is renamed by RenameDir.
func (n *Names) Rename(ctx context.Context, ds, from, to string) error {
	e, err := ask(ctx, n, from, "remove", n.serveRemove, pathMsg{ds, from})
	if err != nil {
		return err
	}
	put, err := ask(ctx, n, to, "put", n.servePut, putMsg{pathMsg: pathMsg{ds, to}, Entry: e})
	if err != nil {
		// Put it back rather than lose it; the application's rename fails.
		if _, rerr := ask(ctx, n, from, "put", n.servePut, putMsg{pathMsg: pathMsg{ds, from}, Entry: e}); rerr != nil {
			n.log.Error("a renamed entry is in neither of its names' tables", "dataset", ds, "from", from, "to", to, "err", rerr)
		}
		return err
	}
	n.tell(ctx, e.Holders, applyMsg{pathMsg: pathMsg{ds, from}, To: to})
	if put.Old != nil {
		var gone []int
		for _, h := range put.Old.Holders {
			if !slices.Contains(e.Holders, h) {
				gone = append(gone, h)
			}
		}
		n.tell(ctx, gone, applyMsg{pathMsg: pathMsg{ds, to}})
	}
	return nil
}

// RenameDir renames directory from of writing dataset ds to to, job-wide
// (Orbax renames default.orbax-checkpoint-tmp to default inside its step
// directory once every process wrote its part). Every entry at or below
// from changes its path, and so, most of them, their owner: every node
// moves the entries it owns to their new owners, and every other node
// renames its copy of the directory; the caller renames its own. to must
// not exist (ErrExists). Run once every node is done creating below from,
// as the application's rename is.
func (n *Names) RenameDir(ctx context.Context, ds, from, to string) error {
	if _, err := ask(ctx, n, to, "peek", n.servePeek, pathMsg{ds, to}); err == nil {
		return fmt.Errorf("%s/%s: %w", ds, to, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	ctx, cancel := n.callContext(ctx)
	defer cancel()
	var failed error
	n.net.FanoutEach(ctx, n.all(), "movedir", moveMsg{pathMsg: pathMsg{ds, from}, To: to, Caller: n.self}, func(node int, r jobnet.Reply) {
		if err := r.Decode(nil); err != nil && failed == nil {
			failed = fmt.Errorf("names: rename %s/%s to %s: node %d: %w", ds, from, to, node, err)
		}
	})
	return failed
}

// moveDir moves what this node owns of directory m.Path (and below) to
// m.To, handing each entry to its new owner, and renames this node's copy
// of the directory unless it is the caller's.
func (n *Names) moveDir(ctx context.Context, m moveMsg) error {
	if err := n.speaksFor(m.Dataset); err != nil && !errors.Is(err, errNotYet) {
		return err
	}
	byOwner := map[int]map[string]Entry{}
	for rel, e := range n.own.take(m.Dataset, m.Path) {
		moved := m.To + strings.TrimPrefix(rel, m.Path)
		o := n.owner(moved)
		if byOwner[o] == nil {
			byOwner[o] = map[string]Entry{}
		}
		byOwner[o][moved] = e
	}
	for o, es := range byOwner {
		msg := adoptMsg{Dataset: m.Dataset, Entries: es}
		var err error
		if o == n.self {
			_, err = n.serveAdopt(n.self, msg)
		} else {
			err = n.net.Call(ctx, o, "adopt", msg, nil)
		}
		if err != nil {
			return fmt.Errorf("hand the entries below %s/%s to node %d: %w", m.Dataset, m.To, o, err)
		}
	}
	if m.Caller == n.self {
		return nil
	}
	return n.o.Store.RenameEntry(m.Dataset, m.Path, m.To)
}

// List returns every entry directly in directory dir ("" for the root) of
// writing dataset ds that some node created, by name: every node answers
// with those it owns. A node that has not heard yet that the dataset
// began owns none of its entries (a create waits until the owner has
// heard), so its part is empty.
func (n *Names) List(ctx context.Context, ds, dir string) (map[string]Entry, error) {
	ctx, cancel := n.callContext(ctx)
	defer cancel()
	out := map[string]Entry{}
	var failed error
	n.net.FanoutEach(ctx, n.all(), "list", listMsg{Dataset: ds, Dir: dir}, func(node int, r jobnet.Reply) {
		var part map[string]Entry
		if err := r.Decode(&part); errors.Is(err, errNotYet) {
			return
		} else if err != nil {
			failed = fmt.Errorf("names: list %s/%s: node %d: %w", ds, dir, node, err)
			return
		}
		for name, e := range part {
			out[name] = e
		}
	})
	return out, failed
}

// ask has the owner of path rel serve req (kind, as the owner's serve
// function): directly when this node owns it, not through the message
// layer (a call to itself still costs an encoding and a dispatch, about
// 60 µs of a create), else by a call to it.
func ask[Req, Resp any](ctx context.Context, n *Names, rel, kind string, serve func(int, Req) (Resp, error), req Req) (Resp, error) {
	if n.owner(rel) == n.self {
		if resp, err := serve(n.self, req); !errors.Is(err, errNotYet) {
			return resp, err
		}
	}
	var resp Resp
	err := n.call(ctx, rel, kind, req, &resp)
	return resp, err
}

// call sends a request about path rel to its owner: again, until the
// member timeout, while the owner has not heard that the dataset began.
// An owner that cannot be reached, or cannot speak for the dataset, fails
// the call with ErrUnknown.
func (n *Names) call(ctx context.Context, rel, kind string, req, resp any) error {
	ctx, cancel := n.callContext(ctx)
	defer cancel()
	owner := n.owner(rel)
	wait := sleep.Backoff{Min: 5 * time.Millisecond, Max: 200 * time.Millisecond}
	for {
		err := n.net.Call(ctx, owner, kind, req, resp)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, context.Canceled):
			return err // the daemon stops (EINTR)
		case !jobnet.IsRemote(err):
			err = fmt.Errorf("names: node %d, which keeps %s, did not answer (%v): %w", owner, path.Clean(rel), err, ErrUnknown)
			n.log.Warn("a name of a dataset being written cannot be reached: the application's call fails with EIO", "err", err)
			return err
		case !errors.Is(err, errNotYet):
			return err
		}
		if wait.Wait(ctx) != nil {
			err = fmt.Errorf("names: node %d, which keeps %s, never heard that the dataset began: %w", owner, path.Clean(rel), ErrUnknown)
			n.log.Warn("a name of a dataset being written cannot be reached: the application's call fails with EIO", "err", err)
			return err
		}
	}
}

// tell has every holder but this node apply m to its copy. A holder that
// cannot be told keeps a copy the application no longer has; it is down,
// and the dataset fails anyway, since a node that stops while a dataset is
// written fails it.
func (n *Names) tell(ctx context.Context, holders []int, m applyMsg) {
	others := slices.DeleteFunc(slices.Clone(holders), func(h int) bool { return h == n.self })
	if len(others) == 0 {
		return
	}
	ctx, cancel := n.callContext(ctx)
	defer cancel()
	for node, err := range n.net.CallAll(ctx, others, "apply", m) {
		n.log.Warn("a node could not change its copy of an entry as the job did", "dataset", m.Dataset,
			"path", m.Path, "to", m.To, "peer", node, "err", err)
	}
}

// all returns every node index of the job.
func (n *Names) all() []int {
	out := make([]int, n.o.Nodes)
	for i := range out {
		out[i] = i
	}
	return out
}
