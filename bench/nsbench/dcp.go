package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// targetDCP is issue 13's target for loading a checkpoint through the
// mounts against the same reads from one local directory.
const targetDCP = 1.5

// reshardWorld is the world size of the resharded load.
const reshardWorld = 2

// readOp is one read a rank makes: length bytes of file at offset.
type readOp struct {
	file          string
	offset, bytes int64
}

// shardName is DCP's name of global rank g's shard.
func shardName(g int) string { return fmt.Sprintf("__%d_0.distcp", g) }

// dcpLayout is a DCP-like checkpoint of shards ranks: what each file holds.
type dcpLayout struct {
	shards                      int
	shard, replicated, metadata int64
}

// files returns the files of the checkpoint by writer: global rank g writes
// its shard, rank 0 also the replicated file; .metadata (rank 0's, last)
// is left out: it is the completion marker.
func (l dcpLayout) files(g int) map[string]int64 {
	out := map[string]int64{shardName(g): l.shard}
	if g == 0 {
		out["replicated.distcp"] = l.replicated
	}
	return out
}

// plan returns the reads of rank g of a load on world ranks: .metadata and
// the replicated file whole, then its own shard when the world is the
// one that saved; resharded, its 1/world slice of every shard (a tensor
// saved split along one dimension and loaded split along another).
func (l dcpLayout) plan(g, world int) []readOp {
	ops := []readOp{{".metadata", 0, l.metadata}, {"replicated.distcp", 0, l.replicated}}
	if world == l.shards {
		return append(ops, readOp{shardName(g), 0, l.shard})
	}
	for s := range l.shards {
		lo, hi := l.shard*int64(g)/int64(world), l.shard*int64(g+1)/int64(world)
		ops = append(ops, readOp{shardName(s), lo, hi - lo})
	}
	return ops
}

// dcpResult is the DCP pattern's rounds: the same world as the save, and
// resharded.
type dcpResult struct {
	layout            dcpLayout
	same, reshard     loadTimes
	sameRead, resRead int64 // bytes the ranks of one load read, all ranks together
}

// loadTimes are the rounds of one load: through the mounts and from one
// local directory, and what the daemons received for the mount's.
type loadTimes struct {
	mount, direct []time.Duration
	received      []int64
}

// dcp writes a DCP-like checkpoint through the mounts (every rank its
// shard, rank 0 the replicated file and then .metadata, which completes it)
// and the same files into one directory beside the caches, and times the
// load with the same world and resharded, from both, in turns.
func (b *bench) dcp(ctx context.Context, c *job.Cluster) (*dcpResult, error) {
	nodes, ranks := len(c.Nodes), b.o.ranks
	world := nodes * ranks
	l := dcpLayout{shards: world, shard: b.o.shard, replicated: b.o.replicated, metadata: b.o.metadata}
	res := &dcpResult{layout: l}
	for g := range world {
		res.sameRead += opsBytes(l.plan(g, world))
	}
	for g := range reshardWorld {
		res.resRead += opsBytes(l.plan(g, reshardWorld))
	}
	bufs := make([][]byte, world)
	for i := range bufs {
		bufs[i] = make([]byte, ioSize)
	}
	for r := 0; r <= b.o.rounds; r++ {
		direct := filepath.Join(b.work, fmt.Sprintf("direct.dcp.%d", r))
		if err := b.writeDCP(nil, direct, l, ranks); err != nil {
			return res, err
		}
		for _, v := range []struct {
			name  string
			world int
			t     *loadTimes
		}{{"same", world, &res.same}, {"reshard", reshardWorld, &res.reshard}} {
			ds := fmt.Sprintf("dcp%s.%d", v.name, r)
			if err := b.writeDCP(c, ds, l, ranks); err != nil {
				return res, err
			}
			if err := settled(ctx, c, ds); err != nil {
				return res, err
			}
			// Rank g of a load runs on node g / ranks: the resharded
			// load's two ranks on the first node(s).
			mountDir := func(g int) string { return filepath.Join(c.Nodes[g/ranks].Mount, ds) }
			directDir := func(int) string { return direct }
			err := b.compare(ctx, c, "dcp", r, v.name, v.world, v.t,
				func() (time.Duration, error) { return load(l, v.world, mountDir, bufs) },
				func() (time.Duration, error) { return load(l, v.world, directDir, bufs) })
			if err != nil {
				return res, fmt.Errorf("%s load of %s: %w", v.name, ds, err)
			}
		}
		if err := os.RemoveAll(direct); err != nil {
			return res, err
		}
	}
	return res, nil
}

// compare times a load through the mounts (mount) and the same from one
// directory (direct), in the order round r gives (alternating, so neither
// always follows the other), with what the daemons received during the
// mount's, and keeps them in t unless r is the warm-up.
func (b *bench) compare(ctx context.Context, c *job.Cluster, what string, r int, name string, world int, t *loadTimes,
	mount, direct func() (time.Duration, error)) error {
	var m, d time.Duration
	var got int64
	measures := []func() error{
		func() error {
			before, err := received(ctx, c)
			if err != nil {
				return err
			}
			if m, err = mount(); err != nil {
				return err
			}
			after, err := received(ctx, c)
			got = sum(after) - sum(before)
			return err
		},
		func() (err error) {
			d, err = direct()
			return err
		},
	}
	if r%2 == 1 {
		measures[0], measures[1] = measures[1], measures[0]
	}
	for _, f := range measures {
		if err := f(); err != nil {
			return err
		}
	}
	b.progress("%-6s %-8s %-7s world %2d: mounts %s, one directory %s (%.2f×); daemons received %s",
		what, roundName(r), name, world, fmtSec(m), fmtSec(d), m.Seconds()/d.Seconds(), job.FormatBytes(got))
	if r > 0 {
		t.mount, t.direct, t.received = append(t.mount, m), append(t.direct, d), append(t.received, got)
	}
	return nil
}

// writeDCP writes checkpoint ds of layout l as its ranks would: through
// the mounts of c (rank g on node g / ranks; ds is the dataset's name), or,
// with c nil, into directory ds; .metadata last, on rank 0's node.
func (b *bench) writeDCP(c *job.Cluster, ds string, l dcpLayout, ranks int) error {
	root := func(g int) string {
		if c == nil {
			return ds
		}
		return filepath.Join(c.Nodes[g/ranks].Mount, ds)
	}
	// Rank 0 makes the directory; every node shows it before mkdir returns.
	if err := os.MkdirAll(root(0), 0o755); err != nil {
		return err
	}
	_, err := timeAll(l.shards, func(g int) error { return b.write(root(g), l.files(g), "") })
	if err != nil {
		return err
	}
	return b.write(root(0), map[string]int64{".metadata": l.metadata}, "")
}

// load runs the reads of every rank of a load on world ranks at once, rank
// g in directory dir(g), and returns the time until the last finished.
func load(l dcpLayout, world int, dir func(g int) string, bufs [][]byte) (time.Duration, error) {
	return timeAll(world, func(g int) error {
		for _, op := range l.plan(g, world) {
			if err := readRange(filepath.Join(dir(g), op.file), op.offset, op.bytes, bufs[g]); err != nil {
				return fmt.Errorf("rank %d: %w", g, err)
			}
		}
		return nil
	})
}

// readRange reads n bytes of path from offset off, len(buf) at a time, as
// one open file.
func readRange(path string, off, n int64, buf []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for n > 0 {
		k, err := f.ReadAt(buf[:min(n, int64(len(buf)))], off)
		n, off = n-int64(k), off+int64(k)
		if err == io.EOF && n > 0 {
			return fmt.Errorf("%s: %d bytes short", path, n)
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
	return nil
}

// opsBytes adds up the bytes of ops.
func opsBytes(ops []readOp) int64 {
	var n int64
	for _, op := range ops {
		n += op.bytes
	}
	return n
}
