package completion_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/node/nodetest"
)

// fill returns n bytes of value b.
func fill(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// TestSharedFileAgrees: a file every node wrote a part of, with a header
// all of them wrote alike and a node that wrote the file whole (through
// the kernel) with zeros where others wrote, is recorded with each node's
// ranges.
func TestSharedFileAgrees(t *testing.T) {
	j := job(t, 0)
	j.RestartAll()
	for _, n := range j.Nodes {
		n.WriteAt("ckpt.1", "one.h5", 0, []byte("HDF5 header"))
		n.WriteAt("ckpt.1", "one.h5", int64(1000+n.Index*5000), fill(byte('a'+n.Index), 5000))
	}
	// Node 0 also holds whole.bin whole, written past the daemon, with
	// zeros where node 2 wrote.
	j.Nodes[0].Write("ckpt.1", map[string][]byte{"whole.bin": append(fill('w', 100), make([]byte, 100)...)})
	j.Nodes[2].WriteAt("ckpt.1", "whole.bin", 100, fill('x', 150))
	complete(t, j, 1, "ckpt.1")
	j.WaitState(wait, "ckpt.1", cache.Protected, j.All()...)
	rec := recordOf(t, j, 3, "ckpt.1")
	for _, m := range rec.Members {
		for _, f := range m.Files {
			if f.Path == "one.h5" {
				want := []files.Range{{Off: 0, Len: 11}, {Off: int64(1000 + m.Node*5000), Len: 5000}}
				if !f.Partial || len(f.Ranges) != 2 || f.Ranges[0] != want[0] || f.Ranges[1] != want[1] {
					t.Errorf("node %d's one.h5 in the record: partial %v, ranges %v; want %v", m.Node, f.Partial, f.Ranges, want)
				}
			}
		}
	}
}

// TestSharedFileDisagrees: two nodes that wrote different bytes where
// their ranges overlap fail the dataset on every node, with a reason that
// names the file and the bytes; a node that wrote a file whole with other
// bytes than zeros where another wrote it too does as well.
func TestSharedFileDisagrees(t *testing.T) {
	for name, write := range map[string]func(j []*nodetest.Node){
		"ranges": func(n []*nodetest.Node) {
			n[0].WriteAt("ckpt.1", "clash.bin", 0, fill('a', 2<<20))
			n[1].WriteAt("ckpt.1", "clash.bin", 1<<20, fill('b', 2<<20))
		},
		"whole and ranges": func(n []*nodetest.Node) {
			n[0].Write("ckpt.1", map[string][]byte{"clash.bin": fill('a', 2<<20)})
			n[1].WriteAt("ckpt.1", "clash.bin", 1<<20, fill('b', 2<<20))
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := job(t, 0)
			j.RestartAll()
			write(j.Nodes)
			for _, n := range j.Nodes[2:] {
				n.Write("ckpt.1", map[string][]byte{"rank": {byte(n.Index)}})
			}
			complete(t, j, 0, "ckpt.1")
			j.WaitState(wait, "ckpt.1", cache.Failed, j.All()...)
			for _, n := range j.Nodes {
				_, reason := n.State("ckpt.1")
				if !strings.Contains(reason, "clash.bin") || !strings.Contains(reason, "1048576") {
					t.Errorf("node %d: failed with %q, want the file and the bytes from 1048576 named", n.Index, reason)
				}
			}
		})
	}
}
