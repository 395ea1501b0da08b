package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/bench/internal/netbound"
)

// targetRemote is issue 13's target for a remote read through the mount
// against one plain TCP stream of the same bytes.
const targetRemote = 0.8

// remoteResult is the remote read's rounds.
type remoteResult struct {
	size   int64
	stream []time.Duration // one loopback TCP stream between two processes
	// streamIO is the stream with the sender reading the file from -dir
	// and the receiver writing it into a new file there, at once: what a
	// fetch into a read cache cannot do without.
	streamIO []time.Duration
	cold     []time.Duration // open, read, close through another node's mount; cold read cache
	open     []time.Duration // of which the open (the fetch into the read cache)
	warm     []time.Duration // the same file again on that node (read cache warm)
	many     []time.Duration // readers at once on a third node, cold
	// manyRecv is what that third node's daemon received meanwhile.
	manyRecv []int64
}

// remote writes a file of -size on one node per round and reads it on two
// others: once alone (beside one TCP stream of the same bytes, in turns),
// once more (warm), and with -readers at once on the third node.
func (b *bench) remote(ctx context.Context, c *job.Cluster) (*remoteResult, error) {
	res := &remoteResult{size: b.o.size}
	procs := netbound.Procs{Self: b.self}
	lio, err := netbound.NewLocalEach(filepath.Join(b.work, "remote-bound"), []int64{b.o.size, 0}, []int64{0, b.o.size}, b.buf)
	if err != nil {
		return res, err
	}
	defer lio.Close()
	bufs := make([][]byte, b.o.readers)
	for i := range bufs {
		bufs[i] = make([]byte, ioSize)
	}
	nodes := len(c.Nodes)
	for r := 0; r <= b.o.rounds; r++ {
		w := r % nodes
		one, many := c.Nodes[(w+1)%nodes], c.Nodes[(w+2)%nodes]
		ds := fmt.Sprintf("remote.%d", r)
		if err := b.write(filepath.Join(c.Nodes[w].Mount, ds), map[string]int64{"data.bin": b.o.size}, "COMPLETE"); err != nil {
			return res, err
		}
		if err := settled(ctx, c, ds); err != nil {
			return res, err
		}
		var stream, streamIO, cold, open time.Duration
		measures := []func() error{
			func() error {
				s, err := procs.Run(ctx, netbound.Stream(b.o.size), nil)
				stream = s.Wall
				if err == nil {
					s, err = procs.Run(ctx, netbound.Stream(b.o.size), lio)
					streamIO = s.Wall
				}
				return err
			},
			func() (err error) {
				cold, open, err = timedRead(filepath.Join(one.Mount, ds, "data.bin"), b.o.size, bufs[0])
				return err
			},
		}
		if r%2 == 1 {
			measures[0], measures[1] = measures[1], measures[0]
		}
		for _, m := range measures {
			if err := m(); err != nil {
				return res, err
			}
		}
		warm, _, err := timedRead(filepath.Join(one.Mount, ds, "data.bin"), b.o.size, bufs[0])
		if err != nil {
			return res, err
		}
		before, err := received(ctx, c)
		if err != nil {
			return res, err
		}
		manyT, err := timeAll(b.o.readers, func(i int) error {
			_, _, err := timedRead(filepath.Join(many.Mount, ds, "data.bin"), b.o.size, bufs[i])
			return err
		})
		if err != nil {
			return res, err
		}
		after, err := received(ctx, c)
		if err != nil {
			return res, err
		}
		got := after[many.Index] - before[many.Index]
		b.progress("remote %-8s node %d → node %d: stream %s (with file I/O %s), read %s (open %s), warm %s; %d readers on node %d %s, received %s",
			roundName(r), w, one.Index, fmtSec(stream), fmtSec(streamIO), fmtSec(cold), fmtSec(open), fmtSec(warm), b.o.readers, many.Index,
			fmtSec(manyT), job.FormatBytes(got))
		if r == 0 {
			continue
		}
		res.stream, res.streamIO = append(res.stream, stream), append(res.streamIO, streamIO)
		res.cold, res.open = append(res.cold, cold), append(res.open, open)
		res.warm, res.many, res.manyRecv = append(res.warm, warm), append(res.many, manyT), append(res.manyRecv, got)
	}
	return res, nil
}

// timedRead opens path, reads it to its end and closes it, and returns the
// time of the whole and of the open; it fails unless it read want bytes.
func timedRead(path string, want int64, buf []byte) (total, open time.Duration, err error) {
	t0 := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	open = time.Since(t0)
	var n int64
	for {
		k, err := f.Read(buf)
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return 0, 0, fmt.Errorf("read %s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return 0, 0, err
	}
	total = time.Since(t0)
	if n != want {
		return 0, 0, fmt.Errorf("read %d bytes of %s, want %d", n, path, want)
	}
	return total, open, nil
}

// fmtSec prints a duration in seconds with millisecond resolution.
func fmtSec(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }
