package cache

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// completeWith writes dataset name with a data file and, in its .scrfs,
// the given extra files, then completes it.
func (ts *testStore) completeWith(t *testing.T, name string, meta map[string][]byte) {
	t.Helper()
	d := ts.write(t, name, "f", 10)
	dir := filepath.Join(d.Dir(), metaDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for n, b := range meta {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.RequestComplete(name, "test"); err != nil {
		t.Fatal(err)
	}
	ts.awaitComplete(t, name)
}

func TestEvictionSetsAsideRedundancyFiles(t *testing.T) {
	ts := newTestStore(t, Rules{}, 1)
	red := bytes.Repeat([]byte{7}, 5000)
	ts.completeWith(t, "c1", map[string][]byte{
		"3.xor.grp_1_of_1.mem_2_of_4.redset":     red,
		"3.xor.grp_1_of_1.mem_2_of_4.redset.tmp": []byte("half-written"),
		"4.xor.grp_1_of_1.mem_3_of_4.redset":     nil, // empty: nothing to reuse
		"notes":                                  []byte("not a redundancy file"),
	})
	if got := ts.TakeSpare(); got != "" {
		t.Fatalf("spare %q before any eviction", got)
	}
	ts.completeWith(t, "c2", nil) // evicts c1
	if ts.Get("c1") != nil {
		t.Fatal("c1 not evicted")
	}
	spare := ts.TakeSpare()
	if spare == "" {
		t.Fatal("no spare after evicting a dataset with a redundancy file")
	}
	if b, err := os.ReadFile(spare); err != nil || !bytes.Equal(b, red) {
		t.Fatalf("spare holds %d bytes (%v), want the evicted redundancy file's %d", len(b), err, len(red))
	}
	if got := ts.TakeSpare(); got != "" {
		t.Fatalf("second spare %q: only the non-empty redundancy file qualifies", got)
	}
	// The caller owns what it took; a restart removes any left over.
	ts.completeWith(t, "c3", map[string][]byte{"3.xor.grp_1_of_1.mem_2_of_4.redset": red})
	ts.completeWith(t, "c4", nil)
	ts.reopen(t)
	if got := ts.TakeSpare(); got != "" {
		t.Fatalf("spare %q survived a restart", got)
	}
	if ents, err := os.ReadDir(ts.spareDir()); err == nil && len(ents) > 0 {
		t.Fatalf("spare directory holds %d files after a restart", len(ents))
	}
}

func TestSparesBoundedAndExpire(t *testing.T) {
	ts := newTestStore(t, Rules{}, 1)
	for i := range maxSpares + 3 {
		name := "c" + string(rune('a'+i))
		ts.completeWith(t, name, map[string][]byte{"1.rs.grp_1_of_1.mem_2_of_4.redset": make([]byte, 100+i)})
	}
	// The last dataset is still in the cache; the others' files wait as
	// spares, the newest maxSpares of them.
	ents, err := os.ReadDir(ts.spareDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != maxSpares {
		t.Fatalf("%d spare files, want at most %d", len(ents), maxSpares)
	}
	ts.Store.mu.Lock()
	armed := ts.spareTimer != nil
	ts.Store.mu.Unlock()
	if !armed {
		t.Fatal("no expiry timer while spares wait")
	}
	// Age the two oldest past their time to live, as the timer would find them.
	ts.Store.mu.Lock()
	for i := range ts.spares[:2] {
		ts.spares[i].added = time.Now().Add(-spareTTL)
	}
	ts.Store.mu.Unlock()
	ts.expireSpares()
	if ents, _ := os.ReadDir(ts.spareDir()); len(ents) != maxSpares-2 {
		t.Fatalf("%d spare files after expiry, want %d", len(ents), maxSpares-2)
	}
	if got, want := ts.TakeSpare(), filepath.Join(ts.spareDir(), "6"); got != want {
		t.Fatalf("took spare %q, want the largest left, %q", got, want)
	}
}
