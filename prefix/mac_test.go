package prefix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIndexMACs: an entry someone without the key changed, or wrote with
// another key, is never offered; an update does not sign it on the way;
// unsigned entries count only with TrustUnsigned; a forged current mark is
// ignored.
func TestIndexMACs(t *testing.T) {
	dir := fastDir(t)
	ctx := context.Background()
	p := dirPrefix(dir)
	defer p.Close()
	must(t, p.UpdateIndex(ctx, nil, func(ix *Index) error {
		for _, e := range []IndexEntry{
			{Name: "ckpt.1", ID: 1, State: StateComplete, Nodes: 1},
			{Name: "ckpt.2", ID: 2, State: StateComplete, Nodes: 1},
		} {
			must(t, ix.Put(e))
		}
		return ix.SetCurrent("ckpt.2")
	}))
	// Someone edits ckpt.2's entry (more files) and drops ckpt.1's MAC.
	path := indexPath(dir)
	b, err := os.ReadFile(path)
	must(t, err)
	var doc map[string]any
	must(t, json.Unmarshal(b, &doc))
	for _, d := range doc["datasets"].([]any) {
		e := d.(map[string]any)
		switch e["name"] {
		case "ckpt.1":
			delete(e, "mac")
		case "ckpt.2":
			e["files"] = 7
		}
	}
	b, err = json.Marshal(doc)
	must(t, err)
	must(t, os.WriteFile(path, b, 0o644))

	ix, err := p.ReadIndex(ctx)
	must(t, err)
	e1, _ := ix.Lookup("ckpt.1")
	e2, _ := ix.Lookup("ckpt.2")
	if e1.Trust != Unsigned || e2.Trust != Forged || e2.Files != 7 {
		t.Fatalf("trust: ckpt.1 %v, ckpt.2 %v (files %d)\n%s", e1.Trust, e2.Trust, e2.Files, b)
	}
	if e, ok := ix.Newest(nil); ok || ix.Current != "ckpt.2" {
		t.Fatalf("Newest offers %q, current %q", e.Name, ix.Current)
	}
	if err := ix.SetCurrent("ckpt.2"); !errors.Is(err, ErrUnverified) {
		t.Errorf("SetCurrent of a forged entry: %v", err)
	}
	// An update elsewhere keeps them as they are: not signed as ours.
	must(t, p.UpdateIndex(ctx, nil, func(ix *Index) error { return ix.Put(IndexEntry{Name: "ckpt.3", State: StateFlushing}) }))
	ix, err = p.ReadIndex(ctx)
	must(t, err)
	if e, _ := ix.Lookup("ckpt.2"); e.Trust != Forged {
		t.Errorf("an update signed the forged entry: %v", e.Trust)
	}
	if e, _ := ix.Lookup("ckpt.3"); e.Trust != Verified {
		t.Errorf("the new entry: %v", e.Trust)
	}
	// With TrustUnsigned the unsigned entry is offered, never the forged.
	lax, err := Open(ctx, Config{Location: dir, Key: testKey, TrustUnsigned: true})
	must(t, err)
	defer lax.Close()
	ix, err = lax.ReadIndex(ctx)
	must(t, err)
	if e, ok := ix.Newest(nil); !ok || e.Name != "ckpt.1" {
		t.Errorf("with TrustUnsigned, Newest = %q, %v", e.Name, ok)
	}
	// A current mark moved by hand is ignored.
	b, err = os.ReadFile(path)
	must(t, err)
	must(t, os.WriteFile(path, bytes.Replace(b, []byte(`"current": "ckpt.2"`), []byte(`"current": "ckpt.1"`), 1), 0o644))
	if ix, err := p.ReadIndex(ctx); err != nil || ix.Current != "" {
		t.Errorf("a forged current mark: %q, %v", ix.Current, err)
	}
	// Another key verifies nothing.
	other, err := Open(ctx, Config{Location: dir, Key: []byte("someone-elses-key-0123456789abcd")})
	must(t, err)
	defer other.Close()
	ix, err = other.ReadIndex(ctx)
	must(t, err)
	if e, _ := ix.Lookup("ckpt.3"); e.Trust != Forged {
		t.Errorf("another key verified ckpt.3: %v", e.Trust)
	}
}

// TestManifestMACs: a manifest or part changed after it was written, or
// written with another key, or an older one put back in place of the one
// the index completed, is refused with ErrUnverified naming the file.
func TestManifestMACs(t *testing.T) {
	dir := fastDir(t)
	ctx := context.Background()
	p := dirPrefix(dir)
	defer p.Close()
	must(t, p.WritePart(ctx, "ckpt.1", 0, sampleEntries(0)))
	m1, err := p.CompleteFlush(ctx, "ckpt.1", 1, nil, nil, nil)
	must(t, err)
	old, err := os.ReadFile(manifestPath(dir, "ckpt.1"))
	must(t, err)
	m2, err := p.CompleteFlush(ctx, "ckpt.1", 1, []byte("record"), []byte("pointers"), nil)
	must(t, err)
	if m1.SHA256 == m2.SHA256 {
		t.Fatal("two merges wrote the same manifest")
	}
	if _, err := p.ReadManifest(ctx, "ckpt.1", m2.SHA256); err != nil {
		t.Fatal(err)
	}
	// The older, genuinely signed manifest put back: not the one the index
	// names.
	must(t, os.WriteFile(manifestPath(dir, "ckpt.1"), old, 0o644))
	if _, err := p.ReadManifest(ctx, "ckpt.1", m2.SHA256); !errors.Is(err, ErrUnverified) || !strings.Contains(err.Error(), "not the manifest the index completed") {
		t.Errorf("an older manifest: %v", err)
	}
	for name, path := range map[string]string{"manifest": manifestPath(dir, "ckpt.1"), "part": partPath(dir, "ckpt.1", 0)} {
		b, err := os.ReadFile(path)
		must(t, err)
		must(t, os.WriteFile(path, bytes.Replace(b, []byte(`"size":`), []byte(`"size": `), 1), 0o644))
		var rerr error
		if name == "manifest" {
			_, rerr = p.ReadManifest(ctx, "ckpt.1", "")
		} else {
			_, rerr = p.ReadPart(ctx, "ckpt.1", 0)
		}
		if !errors.Is(rerr, ErrUnverified) || !strings.Contains(rerr.Error(), filepath.Base(path)) || !strings.Contains(rerr.Error(), "does not verify") {
			t.Errorf("%s changed by a space: %v", name, rerr)
		}
	}
	// A record, or pointer files, that are not the ones the manifest
	// records.
	must(t, p.WritePart(ctx, "ckpt.2", 0, nil))
	m3, err := p.CompleteFlush(ctx, "ckpt.2", 1, []byte("record"), []byte("pointers"), nil)
	must(t, err)
	if b, err := p.ReadPointers(ctx, m3); err != nil || string(b) != "pointers" {
		t.Fatalf("pointer files beside the manifest: %q, %v", b, err)
	}
	must(t, os.WriteFile(filepath.Join(manifestDir(dir, "ckpt.2"), "record.json"), []byte("forged"), 0o644))
	if _, err := p.ReadRecord(ctx, m3); !errors.Is(err, ErrUnverified) {
		t.Errorf("a changed record: %v", err)
	}
	must(t, os.WriteFile(filepath.Join(manifestDir(dir, "ckpt.2"), "pointers.json"), []byte("forged"), 0o644))
	if _, err := p.ReadPointers(ctx, m3); !errors.Is(err, ErrUnverified) {
		t.Errorf("changed pointer files: %v", err)
	}
}
