package cache

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/layout"
)

// validState is a state file as scrfs writes it, the base of the bad ones.
const validState = `{
  "version": 1, "next_id": 4,
  "datasets": [
    {"id": 1, "name": "ckpt.1", "kind": "dir", "root": "ckpt.1", "state": "protected", "created": "2025-01-01T00:00:00Z", "files": 2, "bytes": 10, "open_for_write": 0, "flush": {"state": "flushed"}},
    {"id": 3, "name": "step_3", "kind": "flat", "root": "out/ckpt", "state": "writing", "created": "2025-01-01T00:00:00Z", "files": 0, "bytes": 0, "open_for_write": 0}
  ],
  "failed": [{"id": 2, "name": "ckpt.2", "kind": "dir", "root": "ckpt.2", "state": "failed", "reason": "lost", "created": "2025-01-01T00:00:00Z", "files": 0, "bytes": 0, "open_for_write": 0}],
  "namespace": [{"path": "out", "mode": 493}, {"path": "out/ckpt", "mode": 16877}]
}`

// Every rule of decodeState rejects a state file that breaks it, and the
// message says which entry.
func TestDecodeStateRejects(t *testing.T) {
	if st, err := decodeState([]byte(validState)); err != nil || len(st.Datasets) != 2 || st.Namespace[1].Mode != 0o755 {
		t.Fatalf("valid state: %+v, %v", st, err)
	}
	cases := []struct{ from, to, says string }{
		{`"name": "ckpt.1"`, `"name": "../../../victim"`, `contains '/'`},
		{`"name": "ckpt.1"`, `"name": ".."`, `not allowed`},
		{`"name": "ckpt.1"`, `"name": ".scrfs"`, `reserved`},
		{`"name": "ckpt.1"`, `"name": ""`, `empty`},
		{`"name": "ckpt.1", "kind": "dir", "root": "ckpt.1"`, `"name": "x", "kind": "dir", "root": "ckpt.1"`, `not its name`},
		{`"root": "out/ckpt"`, `"root": "/etc"`, `not a clean path`},
		{`"root": "out/ckpt"`, `"root": "out/../../etc"`, `not a clean path`},
		{`"root": "out/ckpt"`, `"root": "../x"`, `not a clean path`},
		{`"kind": "flat"`, `"kind": "link"`, `unknown kind`},
		{`"state": "writing"`, `"state": "done"`, `unknown state`},
		{`{"state": "flushed"}`, `{"state": "elsewhere"}`, `unknown flush state`},
		{`"id": 3,`, `"id": 1,`, `appears twice`},
		{`"id": 3,`, `"id": 0,`, `id 0`},
		{`"bytes": 10`, `"bytes": -10`, `negative usage`},
		{`"name": "ckpt.2"`, `"name": "../../victim"`, `failed[0]`},
		{`"id": 2, "name": "ckpt.2"`, `"id": 0, "name": "../../victim"`, `failed[0]`},
		{`"state": "failed"`, `"state": "protected"`, `listed as failed`},
		{`"path": "out", "mode"`, `"path": "../../etc", "mode"`, `namespace[0]`},
		{`"path": "out", "mode"`, `"path": "", "mode"`, `namespace[0]`},
		{`"path": "out", "mode"`, `"path": "out/ckpt", "mode"`, `appears twice`},
		{`"version": 1,`, `"version": 2,`, `version 2`},
		{`"next_id": 4,`, `"next_id": 4, "extra": true,`, `unknown field`},
	}
	for _, tc := range cases {
		if !strings.Contains(validState, tc.from) {
			t.Fatalf("case %q: the valid state has no %q", tc.to, tc.from)
		}
		bad := strings.Replace(validState, tc.from, tc.to, 1)
		_, err := decodeState([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s → %s: error %v, want one saying %q", tc.from, tc.to, err, tc.says)
		}
	}
	if _, err := decodeState([]byte(validState + "{}")); err == nil {
		t.Error("trailing data accepted")
	}
}

// A state.json planted with a dataset named ../../../victim makes the store
// set the file aside: nothing outside the cache directory is touched.
func TestPlantedStateHarmsNothing(t *testing.T) {
	ts := newTestStore(t, Rules{}, 1)
	ts.write(t, "c1", "f", 1)
	ts.Close()
	ts.Store = nil
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.MkdirAll(filepath.Join(victim, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(ts.CacheDirPath(), victim)
	if err != nil {
		t.Fatal(err)
	}
	// Writing, failed and completed entries all name the victim: recovery
	// would otherwise create, trash or count it.
	for _, state := range []State{Writing, Complete, Failed} {
		st := stateFile{Version: stateVersion, NextID: 9, Datasets: []Info{{ID: 7, Name: rel, Kind: KindDir, Root: rel, State: state}}}
		data, _ := json.Marshal(st)
		if err := os.WriteFile(filepath.Join(ts.opts.ControlDir.String(), stateName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		ts.reopen(t)
		for _, d := range ts.Datasets() {
			if d.Name() != "c1" {
				t.Fatalf("state %s: store took in dataset %q", state, d.Name())
			}
		}
		// Evicting and completing everything must not reach the victim.
		ts.RequestComplete("c1", "t")
		ts.Close()
		ts.Store = nil
		if _, err := os.Stat(filepath.Join(victim, "sub")); err != nil {
			t.Fatalf("state %s: victim harmed: %v", state, err)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(ts.opts.ControlDir.String(), stateName+".corrupt-*"))
	if len(matches) == 0 {
		t.Fatal("planted state not moved aside")
	}
}

// A lock file that is a link (to a file the attacker wants truncated) stops
// the store from opening, and the target keeps its bytes; so does a lock
// file with a second name.
func TestLockNeverFollowed(t *testing.T) {
	base := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(base, "control")
	if err := os.Mkdir(control, 0o700); err != nil {
		t.Fatal(err)
	}
	opts := Options{
		CacheDir:   jobdir.Path{Base: base, Names: []string{"cache"}},
		ControlDir: jobdir.Path{Base: base, Names: []string{"control"}},
		CacheSize:  1, Router: mustRouter(t, `^(?P<dataset>[^/]+)/`),
	}
	for _, plant := range []func() error{
		func() error { return os.Symlink(victim, filepath.Join(control, "lock")) },
		func() error { return os.Link(victim, filepath.Join(control, "lock")) },
	} {
		os.Remove(filepath.Join(control, "lock"))
		if err := plant(); err != nil {
			t.Fatal(err)
		}
		s, err := Open(opts)
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, jobdir.ErrUnsafe) {
			t.Fatalf("Open with a planted lock: %v, want an unsafe-directory error", err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "root only" {
			t.Fatalf("lock target rewritten to %q", b)
		}
	}
}

// CacheDirPath is the cache directory's path, open or not.
func (ts *testStore) CacheDirPath() string { return ts.opts.CacheDir.String() }

// The state file parser takes any bytes without panicking, and what it
// accepts has only valid names and paths and survives a round trip.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(validState))
	f.Add([]byte(`{"version":1,"next_id":1,"datasets":[]}`))
	f.Add([]byte(`{"version":1,"datasets":[{"id":1,"name":"../x","state":"writing"}]}`))
	f.Add([]byte(`{"version":1,"namespace":[{"path":"a/b","mode":4294967295}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(data)
		if err != nil {
			return
		}
		for _, list := range [][]Info{st.Datasets, st.Failed} {
			for _, info := range list {
				if layout.CheckDatasetName(info.Name) != nil || checkMountPath(info.Root) != nil || !info.State.valid() {
					t.Fatalf("accepted %+v", info)
				}
			}
		}
		if len(st.Failed) > maxFailures {
			t.Fatalf("accepted %d failures", len(st.Failed))
		}
		for _, ns := range st.Namespace {
			if ns.Path == "" || checkMountPath(ns.Path) != nil || ns.Mode&^0o7777 != 0 {
				t.Fatalf("accepted namespace entry %+v", ns)
			}
		}
		out, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeState(out); err != nil {
			t.Fatalf("accepted state does not decode again: %v\n%s", err, out)
		}
	})
}

// A failure noted for a dataset this node never held (it has no id) is
// kept across a restart, and does not make the state file unreadable (it
// once did: every completed dataset then came back as writing and failed).
func TestNotedFailureSurvivesRestart(t *testing.T) {
	ts := newTestStore(t, Rules{}, 2)
	ts.write(t, "ckpt.1", "f", 10)
	ts.RequestComplete("ckpt.1", "t")
	ts.awaitComplete(t, "ckpt.1")
	if err := ts.NoteFailed(Route{Name: "ckpt.0", Kind: KindDir, Root: "ckpt.0"}, "lost elsewhere"); err != nil {
		t.Fatal(err)
	}
	ts.reopen(t)
	if d := ts.Get("ckpt.1"); d == nil || d.State() != Complete {
		t.Fatalf("ckpt.1 after a restart: %v", d)
	}
	if f := ts.Failures(); len(f) != 1 || f[0].Name != "ckpt.0" || f[0].Reason != "lost elsewhere" {
		t.Fatalf("failures after a restart: %+v", f)
	}
}
