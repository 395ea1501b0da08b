package names

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/layout"
)

// pathMsg names an entry of a writing dataset.
type pathMsg struct {
	Dataset string `json:"dataset"`
	Path    string `json:"path"`
}

// Check implements jobnet.Checker: nothing a peer sends reaches a path
// unchecked.
func (m pathMsg) Check() error {
	if err := layout.CheckDatasetName(m.Dataset); err != nil {
		return err
	}
	return files.CheckPath(m.Path)
}

// createMsg asks the owner to record an entry created on the asking node.
type createMsg struct {
	pathMsg
	Entry Entry `json:"entry"`
	Excl  bool  `json:"excl,omitempty"`
}

// putMsg asks the owner to set an entry (a rename's target).
type putMsg struct {
	pathMsg
	Entry Entry `json:"entry"`
}

// putReply is the entry a put replaced, if any.
type putReply struct {
	Old *Entry `json:"old,omitempty"`
}

// listMsg asks a node for the entries it owns in a directory.
type listMsg struct {
	Dataset string `json:"dataset"`
	Dir     string `json:"dir,omitempty"`
}

// Check implements jobnet.Checker.
func (m listMsg) Check() error {
	if err := layout.CheckDatasetName(m.Dataset); err != nil {
		return err
	}
	if m.Dir == "" {
		return nil
	}
	return files.CheckPath(m.Dir)
}

// applyMsg asks a holder to do to its copy of an entry what the job did:
// remove it, or rename it to To.
type applyMsg struct {
	pathMsg
	To  string `json:"to,omitempty"`
	Dir bool   `json:"dir,omitempty"`
}

// Check implements jobnet.Checker.
func (m applyMsg) Check() error {
	if err := m.pathMsg.Check(); err != nil {
		return err
	}
	if m.To == "" {
		return nil
	}
	return files.CheckPath(m.To)
}

// moveMsg asks every node to move a directory of a writing dataset, and
// what it owns of it, to To.
type moveMsg struct {
	pathMsg
	To     string `json:"to"`
	Caller int    `json:"caller"`
}

// Check implements jobnet.Checker.
func (m moveMsg) Check() error {
	if err := m.pathMsg.Check(); err != nil {
		return err
	}
	if err := files.CheckPath(m.To); err != nil {
		return err
	}
	if m.To == m.Path || strings.HasPrefix(m.To, m.Path+"/") {
		return fmt.Errorf("move %s into itself (%s)", m.Path, m.To)
	}
	return nil
}

// adoptMsg hands a node entries it owns now: a directory above them was
// renamed.
type adoptMsg struct {
	Dataset string           `json:"dataset"`
	Entries map[string]Entry `json:"entries"`
}

// Check implements jobnet.Checker.
func (m adoptMsg) Check() error {
	if err := layout.CheckDatasetName(m.Dataset); err != nil {
		return err
	}
	for rel, e := range m.Entries {
		if err := files.CheckPath(rel); err != nil {
			return err
		}
		if err := checkEntry(e); err != nil {
			return err
		}
	}
	return nil
}

// handle registers the requests of the names protocol: what an owner
// serves (the same functions answer this node's own names directly, see
// ask) and what a holder applies.
func (n *Names) handle() {
	jobnet.Handle(n.net, "create", served(n.serveCreate))
	jobnet.Handle(n.net, "lookup", served(n.serveLookup))
	jobnet.Handle(n.net, "remove", served(n.serveRemove))
	jobnet.Handle(n.net, "put", served(n.servePut))
	jobnet.Handle(n.net, "list", served(n.serveList))
	jobnet.Handle(n.net, "adopt", served(n.serveAdopt))
	jobnet.Handle(n.net, "peek", served(n.servePeek))
	jobnet.Handle(n.net, "movedir", func(ctx context.Context, from int, m moveMsg) (any, error) {
		return struct{}{}, n.moveDir(ctx, m)
	})
	jobnet.Handle(n.net, "apply", func(ctx context.Context, from int, m applyMsg) (any, error) {
		if m.To != "" {
			return struct{}{}, n.o.Store.RenameEntry(m.Dataset, m.Path, m.To)
		}
		return struct{}{}, n.o.Store.RemoveEntry(m.Dataset, m.Path, m.Dir)
	})
}

// served makes an owner's function a jobnet handler.
func served[Req, Resp any](serve func(from int, req Req) (Resp, error)) func(context.Context, int, Req) (any, error) {
	return func(_ context.Context, from int, req Req) (any, error) { return serve(from, req) }
}

func (n *Names) serveCreate(from int, m createMsg) (Entry, error) {
	if err := checkEntry(m.Entry); err != nil {
		return Entry{}, err
	}
	if err := n.speaksFor(m.Dataset); err != nil {
		return Entry{}, err
	}
	return n.own.create(m.Dataset, m.Path, m.Entry, m.Excl, from)
}

func (n *Names) serveLookup(from int, m pathMsg) (Entry, error) {
	if err := n.speaksFor(m.Dataset); err != nil {
		return Entry{}, err
	}
	return n.own.lookup(m.Dataset, m.Path, from)
}

func (n *Names) serveRemove(from int, m pathMsg) (Entry, error) {
	if err := n.speaksFor(m.Dataset); err != nil {
		return Entry{}, err
	}
	return n.own.remove(m.Dataset, m.Path)
}

func (n *Names) servePut(from int, m putMsg) (putReply, error) {
	if err := checkEntry(m.Entry); err != nil {
		return putReply{}, err
	}
	if err := n.speaksFor(m.Dataset); err != nil {
		return putReply{}, err
	}
	return putReply{Old: n.own.put(m.Dataset, m.Path, m.Entry)}, nil
}

// servePeek answers whether entry m.Path exists, without counting the
// asking node among its holders (it makes no copy of it).
func (n *Names) servePeek(from int, m pathMsg) (Entry, error) {
	if err := n.speaksFor(m.Dataset); err != nil {
		return Entry{}, err
	}
	return n.own.peek(m.Dataset, m.Path)
}

func (n *Names) serveAdopt(from int, m adoptMsg) (struct{}, error) {
	if err := n.speaksFor(m.Dataset); err != nil && !errors.Is(err, errNotYet) {
		return struct{}{}, err
	}
	for rel, e := range m.Entries {
		n.own.put(m.Dataset, rel, e)
	}
	return struct{}{}, nil
}

func (n *Names) serveList(from int, m listMsg) (map[string]Entry, error) {
	if err := n.speaksFor(m.Dataset); err != nil {
		return nil, err
	}
	return n.own.list(m.Dataset, m.Dir), nil
}

// checkEntry checks an entry a peer sent.
func checkEntry(e Entry) error {
	switch {
	case e.Type != files.Regular && e.Type != files.Dir && e.Type != files.Symlink:
		return fmt.Errorf("entry of type %s: only files, directories and symlinks are created job-wide", e.Type)
	case e.Mode&^0o7777 != 0:
		return fmt.Errorf("entry mode %#o has bits beyond 07777", e.Mode)
	case (e.Type == files.Symlink) != (e.Target != ""):
		return fmt.Errorf("entry of type %s with target %q", e.Type, e.Target)
	}
	return nil
}
