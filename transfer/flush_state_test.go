package transfer

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/layout"
)

// testDir returns a fresh verified control directory.
func testDir(t *testing.T) *jobdir.Dir {
	t.Helper()
	d, err := jobdir.Create(t.TempDir(), "control")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestFlushStateCountsEachDatasetOnce(t *testing.T) {
	dir := testDir(t)
	st, err := loadFlushState(dir)
	if err != nil || st.Settled != 0 {
		t.Fatalf("fresh state %+v, %v", st, err)
	}
	for _, name := range []string{"c1", "c2", "c1", "c3", "c2"} {
		st.count(name)
	}
	if st.Settled != 3 {
		t.Fatalf("settled %d after three distinct datasets", st.Settled)
	}
	if err := st.save(dir); err != nil {
		t.Fatal(err)
	}
	// A restart: the counter and what it counted survive.
	back, err := loadFlushState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.count("c3") || back.Settled != 3 || !back.count("c4") || back.Settled != 4 {
		t.Fatalf("after reload: %+v", back)
	}
	// The memory of counted names is bounded; old names may be counted again.
	for i := range maxCounted + 10 {
		back.count(fmt.Sprint("d", i))
	}
	if len(back.Counted) != maxCounted || back.count(fmt.Sprint("d", maxCounted+9)) {
		t.Fatalf("counted list %d long", len(back.Counted))
	}
}

func TestFlushStateLost(t *testing.T) {
	var st flushState
	st.lose("c1", "evicted")
	st.lose("c2", "failed: boom")
	st.lose("c1", "failed: again")
	if got := st.lostWhy("c1"); got != "failed: again" {
		t.Fatalf("lostWhy(c1) = %q", got)
	}
	if got := st.lostWhy("never"); got != "" {
		t.Fatalf("lostWhy(never) = %q", got)
	}
	if len(st.Lost) != 2 {
		t.Fatalf("lost list %+v", st.Lost)
	}
	for i := range maxLost + 5 {
		st.lose(fmt.Sprint("x", i), "evicted")
	}
	if len(st.Lost) != maxLost || st.lostWhy("c2") != "" || st.lostWhy(fmt.Sprint("x", maxLost+4)) == "" {
		t.Fatalf("lost list not bounded to the newest %d: %d", maxLost, len(st.Lost))
	}
}

func TestFlushStateUnreadable(t *testing.T) {
	dir := testDir(t)
	for _, bad := range []string{`{"version":1,`, `{"version":2,"settled":5}`, `[]`,
		`{"version":1,"settled":1,"counted":["../../../victim"]}`,
		`{"version":1,"lost":[{"name":"a/b","why":"evicted"}]}`,
		`{"version":1,"lost":[{"name":".scrfs","why":"evicted"}]}`} {
		if err := os.WriteFile(dir.Join(flushStateName), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := loadFlushState(dir)
		if err == nil || st.Settled != 0 || st.Version != flushStateVersion {
			t.Errorf("%s: state %+v, err %v", bad, st, err)
		}
	}
}

func FuzzDecodeFlushState(f *testing.F) {
	f.Add([]byte(`{"version":1,"settled":3,"counted":["a","b"],"lost":[{"name":"c","why":"evicted"}]}`))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":0}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeFlushState(b)
		if err != nil {
			return
		}
		if st.Version != flushStateVersion || len(st.Counted) > maxCounted || len(st.Lost) > maxLost {
			t.Fatalf("accepted %+v", st)
		}
		for _, n := range st.Counted {
			if layout.CheckDatasetName(n) != nil {
				t.Fatalf("accepted counted name %q", n)
			}
		}
		for _, l := range st.Lost {
			if layout.CheckDatasetName(l.Name) != nil {
				t.Fatalf("accepted lost name %q", l.Name)
			}
		}
		// What was accepted survives a save and load unchanged.
		out, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeFlushState(out)
		if err != nil || again.Settled != st.Settled || len(again.Counted) != len(st.Counted) || len(again.Lost) != len(st.Lost) {
			t.Fatalf("round trip: %+v, %v", again, err)
		}
	})
}

func TestRateMeter(t *testing.T) {
	var m rateMeter
	start := time.Now()
	m.begin(start)
	if r := m.update(0, 100); r != 0 {
		t.Fatalf("rate before any progress: %v", r)
	}
	// Fake a history: 50 bytes one second ago, 100 now.
	m.mu.Lock()
	m.samples = []rateSample{{at: start.Add(-2 * time.Second), done: 0}, {at: start.Add(-time.Second), done: 50}}
	m.mu.Unlock()
	r := m.update(100, 400)
	if r < 20 || r > 60 {
		t.Fatalf("rate %v bytes/s for 100 bytes in ~2 s", r)
	}
	done, total, rate, eta, finished := m.snapshot()
	if done != 100 || total != 400 || rate != r || finished || eta < 300/60 || eta > 300/20 {
		t.Fatalf("snapshot %d/%d rate %v eta %v finished %v", done, total, rate, eta, finished)
	}
	// Samples older than the window are dropped: a stall shows at once.
	m.mu.Lock()
	m.samples = []rateSample{{at: start.Add(-10 * time.Second), done: 0}, {at: start.Add(-9 * time.Second), done: 100}}
	m.mu.Unlock()
	if r := m.update(100, 400); r != 0 {
		t.Fatalf("rate %v after 9 s without progress", r)
	}
	m.finish()
	if _, _, rate, eta, finished := m.snapshot(); rate != 0 || eta != 0 || !finished {
		t.Fatalf("after finish: rate %v eta %v finished %v", rate, eta, finished)
	}
}
