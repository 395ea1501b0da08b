package completion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
)

// A file several nodes wrote (files.Meta's Ranges) is one file once its
// dataset completes: where the writers' ranges overlap they must agree,
// byte for byte, or the dataset fails with a reason naming the file and
// the bytes — a reader must never get one node's bytes where another's
// were written. A member that lists the file whole (written through the
// kernel, not byte by byte) agrees with one that lists ranges where its
// bytes are equal or zero (bytes it may never have written); the one that
// lists ranges is then the one read there (record.View). Node 0 compares
// the overlaps before it records the dataset: usually none, or a page or
// a header at the edges of the ranks' parts.

// maxCompare bounds the bytes one "bytes" request moves.
const maxCompare = 1 << 20

// bytesReq asks a node for bytes of its copy of a file of a complete
// dataset.
type bytesReq struct {
	Dataset string `json:"dataset"`
	Path    string `json:"path"`
	Off     int64  `json:"off"`
	Len     int64  `json:"len"`
}

// Check implements jobnet.Checker.
func (m bytesReq) Check() error {
	if err := layout.CheckDatasetName(m.Dataset); err != nil {
		return err
	}
	if m.Off < 0 || m.Len <= 0 || m.Len > maxCompare {
		return fmt.Errorf("bad range: %d bytes at %d", m.Len, m.Off)
	}
	return files.CheckPath(m.Path)
}

type bytesReply struct {
	Data []byte `json:"data"`
}

// handleBytes answers node 0's comparison with bytes of this node's copy
// of a file of a complete dataset (zeros past its end).
func (c *Completer) handleBytes(ctx context.Context, from int, m bytesReq) (any, error) {
	if from != coordinator {
		return nil, fmt.Errorf("node %d asked for bytes of %s; only node 0 compares", from, m.Dataset)
	}
	ds := c.o.Store.Get(m.Dataset)
	if ds == nil || !ds.State().Completed() {
		return nil, fmt.Errorf("node %d holds no complete copy of %s", c.self, m.Dataset)
	}
	f, err := os.Open(filepath.Join(ds.Dir(), filepath.FromSlash(m.Path)))
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", c.self, err)
	}
	defer f.Close()
	b := make([]byte, m.Len)
	if _, err := f.ReadAt(b, m.Off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("node %d: read %s/%s: %w", c.self, m.Dataset, m.Path, err)
	}
	return bytesReply{Data: b}, nil
}

// writer is one member's copy of a file several members wrote.
type writer struct {
	node int
	meta *files.Meta
}

// sharedFiles returns the regular files of shares that more than one
// node lists, each with its writers by node.
func sharedFiles(shares []share) map[string][]writer {
	by := map[string][]writer{}
	for n, s := range shares {
		for i := range s.rep.Files {
			if m := &s.rep.Files[i]; m.Type == files.Regular {
				by[m.Path] = append(by[m.Path], writer{n, m})
			}
		}
	}
	for p, ws := range by {
		if len(ws) < 2 {
			delete(by, p)
		}
	}
	return by
}

// compareShared compares, for every file several nodes wrote, the bytes
// the writers' copies hold where their ranges overlap, and returns why
// the dataset cannot be one ("" when every overlap agrees).
func (c *Completer) compareShared(ctx context.Context, dataset string, shares []share) string {
	shared := sharedFiles(shares)
	for _, p := range slices.Sorted(maps.Keys(shared)) {
		ws := shared[p]
		for i := range ws {
			for j := i + 1; j < len(ws); j++ {
				for _, r := range files.Overlap(ws[i].meta.Held(), ws[j].meta.Held()) {
					if why := c.compareRange(ctx, dataset, p, ws[i], ws[j], r); why != "" {
						return why
					}
				}
			}
		}
	}
	return ""
}

// compareRange compares bytes r of file p of writers a and b, a chunk at
// a time, and says why they disagree ("" if they do not).
func (c *Completer) compareRange(ctx context.Context, dataset, p string, a, b writer, r files.Range) string {
	for off := r.Off; off < r.End(); off += maxCompare {
		n := min(maxCompare, r.End()-off)
		ba, err := c.bytesOf(ctx, a.node, dataset, p, off, n)
		if err != nil {
			return fmt.Sprintf("%s, written on nodes %d and %d, could not be compared: %v", p, a.node, b.node, err)
		}
		bb, err := c.bytesOf(ctx, b.node, dataset, p, off, n)
		if err != nil {
			return fmt.Sprintf("%s, written on nodes %d and %d, could not be compared: %v", p, a.node, b.node, err)
		}
		if d := disagree(ba, bb, a.meta.Partial, b.meta.Partial); d != nil {
			clash := files.Range{Off: off + d.first, Len: d.last + 1 - d.first}
			why := fmt.Sprintf("%s: nodes %d and %d wrote %v differently (their ranges overlap over %v)", p, a.node, b.node, clash, r)
			// An MPI-IO program's independent writes go through ROMIO's
			// data sieving, which reads a block, patches its part in and
			// writes the whole block back: what it reads back of this
			// node's copy where other nodes wrote is not their bytes.
			return why + "; if an MPI-IO program wrote it, set the MPI-IO hint romio_ds_write to disable " +
				"(ROMIO's data sieving writes back whole blocks, over bytes other nodes wrote)"
		}
	}
	return ""
}

// bytesOf asks node for n bytes at off of its copy of file p.
func (c *Completer) bytesOf(ctx context.Context, node int, dataset, p string, off, n int64) ([]byte, error) {
	var rep bytesReply
	if err := c.net.Call(ctx, node, "bytes", bytesReq{Dataset: dataset, Path: p, Off: off, Len: n}, &rep); err != nil {
		return nil, err
	}
	if int64(len(rep.Data)) != n {
		return nil, fmt.Errorf("node %d sent %d bytes for %d", node, len(rep.Data), n)
	}
	return rep.Data, nil
}

// disagreement is where two copies' bytes disagree, relative to the
// compared chunk.
type disagreement struct{ first, last int64 }

// disagree compares two copies' bytes of one chunk. A byte differs unless
// it is equal, or the side that lists the file whole has a zero there
// where the side that lists ranges does not (a byte the whole side may
// never have written).
func disagree(a, b []byte, exactA, exactB bool) *disagreement {
	var d *disagreement
	for i := range a {
		if a[i] == b[i] || (exactA && !exactB && b[i] == 0) || (exactB && !exactA && a[i] == 0) {
			continue
		}
		if d == nil {
			d = &disagreement{first: int64(i)}
		}
		d.last = int64(i)
	}
	return d
}
