package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/control"
)

// TestStatusNotes: a link that is up again shows no note (its last error,
// an old "connection refused", belongs to the past and stays in the
// JSON); one that is down shows why; the restored checkpoint is named
// with where it came from; a fetch running shows how far it is.
func TestStatusNotes(t *testing.T) {
	st := &control.Status{
		Node: control.Node{Restored: &control.Restored{Dataset: "ckpt.4", From: "prefix", Reason: "newer than ckpt.3, the newest the caches hold"},
			Fetching:    &control.Fetching{Dataset: "ckpt.5", DoneBytes: 3 << 30, TotalBytes: 8 << 30, BytesPerSecond: 1 << 30},
			TakingStock: true},
		Peers: []control.Peer{
			{Index: 1, Addr: "n1:7411", Up: true, LastError: "dial tcp n1:7411: connection refused"},
			{Index: 2, Addr: "n2:7411", Up: false, LastError: "dial tcp n2:7411: no route to host"},
		},
	}
	var b bytes.Buffer
	printStatus(&b, st)
	out := b.String()
	if !strings.Contains(out, "restored ckpt.4 from the prefix (newer than ckpt.3, the newest the caches hold)") {
		t.Errorf("no restored line:\n%s", out)
	}
	if !strings.Contains(out, "fetching ckpt.5 from the prefix: 3.0 GiB of 8.0 GiB (this node's part), 1.0 GiB/s") {
		t.Errorf("no fetching line:\n%s", out)
	}
	if !strings.Contains(out, "the job is taking stock") {
		t.Errorf("no stock-taking line:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		switch f := strings.Fields(l); {
		case len(f) > 2 && f[1] == "n1:7411" && (f[2] != "up" || len(f) != 3):
			t.Errorf("the link up again shows %q, want no note", l)
		case len(f) > 2 && f[1] == "n2:7411" && !strings.Contains(l, "no route to host"):
			t.Errorf("the link down shows %q, want its error", l)
		}
	}
}
