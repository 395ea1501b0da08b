package completion

import (
	"encoding/json"
	"testing"
)

// TestJudge walks the rules of a share standing, as the package comment
// states them.
func TestJudge(t *testing.T) {
	l := newLedger()
	l.heard("old")            // known before the dataset began
	l.begin("d", "a", "r1")   // a began it in run r1
	l.begin("d", "b", "r1")   // so did b, in r1 ...
	l.begin("d", "b", "r2")   // ... and again in r2, after a crash
	l.heard("new")            // a wiped node, heard of after the start
	l.unreached("d", 2, "r5") // node 2 was not told in time; its run was r5
	for _, tc := range []struct {
		name string
		s    shareReply
		ok   bool
	}{
		{"holds its copy from the run that began it", shareReply{ID: "a", Began: "r1", Files: nil}, true},
		{"copy from a run node 0 never saw begin", shareReply{ID: "a", Began: "r9"}, false},
		{"began twice", shareReply{ID: "b", Began: "r2"}, false},
		{"began it yet holds nothing", shareReply{ID: "a", Empty: true}, false},
		{"known before, wrote nothing", shareReply{ID: "old", Empty: true}, true},
		{"wiped since", shareReply{ID: "new", Empty: true}, false},
		{"never heard of", shareReply{ID: "stranger", Empty: true}, false},
		{"lost its copy", shareReply{ID: "old", Lost: "failed at restart"}, false},
	} {
		if got := l.judge("d", 1, &tc.s); (got == "") != tc.ok {
			t.Errorf("%s: judge = %q, want ok=%v", tc.name, got, tc.ok)
		}
	}
	for _, tc := range []struct {
		name string
		s    shareReply
		ok   bool
	}{
		{"not told, same run, wrote nothing", shareReply{ID: "old", Run: "r5", Empty: true}, true},
		{"not told, restarted, wrote nothing", shareReply{ID: "old", Run: "r6", Empty: true}, false},
		{"not told, restarted, began it late", shareReply{ID: "a", Run: "r1", Began: "r1"}, false},
	} {
		if got := l.judge("d", 2, &tc.s); (got == "") != tc.ok {
			t.Errorf("%s: judge = %q, want ok=%v", tc.name, got, tc.ok)
		}
	}
	if l.judge("unknown", 1, &shareReply{ID: "old", Empty: true}) == "" {
		t.Error("a dataset node 0 never saw begin was judged complete")
	}
}

func TestDecodeLedgerRejects(t *testing.T) {
	good := newLedger()
	good.begin("ckpt.1", "a", "r")
	b, _ := json.Marshal(good)
	if _, err := decodeLedger(b); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"version":2,"next_seq":1}`,
		`{"version":1,"next_seq":0}`,
		`{"version":1,"next_seq":1,"clock":1,"begun":{"../x":{"at":1}}}`,
		`{"version":1,"next_seq":1,"clock":1,"nodes":{"a":5}}`,
		`{"version":1,"next_seq":1,"surprise":true}`,
	} {
		if _, err := decodeLedger([]byte(bad)); err == nil {
			t.Errorf("decodeLedger(%s) accepted", bad)
		}
	}
}

func FuzzDecodeLedger(f *testing.F) {
	l := newLedger()
	l.begin("ckpt.1", "a", "r")
	b, _ := json.Marshal(l)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeLedger(b)
		if err != nil {
			return
		}
		// A ledger that decodes can be used and written back.
		l.begin("next", "x", "y")
		l.judge("next", 1, &shareReply{ID: "x", Began: "y"})
		if _, err := json.Marshal(l); err != nil {
			t.Fatal(err)
		}
	})
}
