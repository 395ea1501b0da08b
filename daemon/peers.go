package daemon

import (
	"context"
	"fmt"

	"github.com/scrfs/scrfs/cluster"
	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/jobnet/peernet"
	"github.com/scrfs/scrfs/peer"
	"github.com/scrfs/scrfs/record"
)

// maxFrame is the largest peer message: a dataset's record (and a node's
// share of it, its file list) travels in one, and the store accepts
// records up to record.MaxBytes; the rest is room for the envelope. With
// peer's default (16 MiB) a dataset of more than about 125,000 files (or
// fewer with long paths) completed on one node and was never recorded on
// the others.
const maxFrame = record.MaxBytes + 1<<20

// startPeers starts this node's peer endpoint in a job of several nodes and
// keeps links up to the members of its redundancy set.
func (d *Daemon) startPeers(ctx context.Context) error {
	if d.size == 1 {
		return nil
	}
	secret, err := cluster.LoadSecret(d.cfg)
	if err != nil {
		return err
	}
	c := d.cfg.Cluster
	// The endpoint closes when Run's deferred stopPeers says, not when ctx
	// ends: the links must outlive the unmount, so that what the mount
	// still asks the job ends as interrupted (EINTR), not as a lost link.
	node, err := peer.Start(context.WithoutCancel(ctx), peer.Config{
		Job:         d.cfg.Job.ID,
		Terms:       d.cluster.Terms(),
		Self:        d.self,
		Addrs:       d.cluster.Addrs,
		Listen:      c.Listen,
		Secret:      secret,
		DialTimeout: c.ConnectTimeout.Duration,
		IOTimeout:   c.IOTimeout.Duration,
		Heartbeat:   c.Heartbeat.Duration,
		MaxFrame:    maxFrame,
		Handlers:    peernet.Handlers(d.mux),
		Logger:      d.log,
		Registerer:  d.reg,
	})
	if err != nil {
		return fmt.Errorf("peer: %w", err)
	}
	d.peer = node
	d.mux.Attach(peernet.Transport(node))
	set, _ := d.cluster.Layout.Find(d.self)
	var others []int
	for _, m := range set.Members {
		if m != d.self {
			others = append(others, m)
		}
	}
	node.Connect(others)
	d.log.Info("peer endpoint listening", "addr", node.Addr().String(), "nodes", d.size,
		"set", set.ID, "members", set.Members, "scheme", d.cluster.Scheme.String(), "from", d.cluster.Source)
	for _, w := range d.cluster.Layout.Warnings {
		d.log.Warn("redundancy set layout", "warning", w)
	}
	return nil
}

func (d *Daemon) stopPeers() {
	if d.peer != nil {
		d.peer.Close()
	}
}

// peerStatus reports the link to every other member of this node's set.
func (d *Daemon) peerStatus() []control.Peer {
	out := []control.Peer{}
	if d.peer == nil {
		return out
	}
	for _, l := range d.peer.Links() {
		out = append(out, control.Peer{Index: l.Peer, Addr: l.Addr, Up: l.Up, Since: l.Since, LastError: l.LastError})
	}
	return out
}
