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
// with where it came from.
func TestStatusNotes(t *testing.T) {
	st := &control.Status{
		Node: control.Node{Restored: &control.Restored{Dataset: "ckpt.4", From: "prefix", Reason: "newer than ckpt.3, the newest the caches hold"}},
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
	for _, l := range strings.Split(out, "\n") {
		switch f := strings.Fields(l); {
		case len(f) > 2 && f[1] == "n1:7411" && (f[2] != "up" || len(f) != 3):
			t.Errorf("the link up again shows %q, want no note", l)
		case len(f) > 2 && f[1] == "n2:7411" && !strings.Contains(l, "no route to host"):
			t.Errorf("the link down shows %q, want its error", l)
		}
	}
}
