package fs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/scrfs/scrfs/cache"
)

// TestPointerFiles: files and symlinks at the mount root that no dataset
// claims are pointer files: written, read, renamed, linked and removed
// there, listed with the datasets, at most 1 MiB, kept with the newest
// dataset and shown again from it after a restart.
func TestPointerFiles(t *testing.T) {
	tm := mountTest(t, mountConfig{rules: cache.Rules{Markers: []string{"COMPLETE"}}})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(tm.dir, "global_step100"), 0o755))
	must(os.WriteFile(filepath.Join(tm.dir, "global_step100", "mp_rank_00_model_states.pt"), []byte("model"), 0o644))
	// DeepSpeed writes latest in place; Megatron's tracker file likewise.
	must(os.WriteFile(filepath.Join(tm.dir, "latest"), []byte("global_step100"), 0o644))
	if b, err := os.ReadFile(filepath.Join(tm.dir, "latest")); err != nil || string(b) != "global_step100" {
		t.Fatalf("latest reads %q, %v", b, err)
	}
	// Written under a temporary name and renamed into place.
	must(os.WriteFile(filepath.Join(tm.dir, "tracker.tmp"), []byte("100"), 0o600))
	must(os.Rename(filepath.Join(tm.dir, "tracker.tmp"), filepath.Join(tm.dir, "tracker.txt")))
	// Lightning's last.ckpt as a link.
	must(os.Symlink("global_step100/mp_rank_00_model_states.pt", filepath.Join(tm.dir, "last.ckpt")))
	if b, err := os.ReadFile(filepath.Join(tm.dir, "last.ckpt")); err != nil || string(b) != "model" {
		t.Fatalf("last.ckpt reads %q, %v", b, err)
	}
	if got, want := readNames(t, tm.dir), []string{"global_step100", "last.ckpt", "latest", "tracker.txt"}; !slices.Equal(got, want) {
		t.Fatalf("the root lists %v, want %v", got, want)
	}
	if fi, err := os.Stat(filepath.Join(tm.dir, "tracker.txt")); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 3 {
		t.Fatalf("tracker.txt: %v, %v", fi, err)
	}
	// Beyond the bound: EFBIG, and nothing else changes.
	err := os.WriteFile(filepath.Join(tm.dir, "big"), bytes.Repeat([]byte{1}, cache.MaxPointerSize+1), 0o644)
	if !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("a pointer file past 1 MiB: %v, want EFBIG", err)
	}
	must(os.Remove(filepath.Join(tm.dir, "big")))
	// Kept with the newest dataset.
	ps, err := cache.LoadPointers(tm.store.Get("global_step100").Dir())
	if err != nil || len(ps) != 3 {
		t.Fatalf("pointer files kept with global_step100: %+v, %v", ps, err)
	}
	// Completed, then restored as a restart restores them.
	must(os.WriteFile(filepath.Join(tm.dir, "global_step100", "COMPLETE"), nil, 0o644))
	tm.awaitComplete(t, "global_step100")
	must(tm.store.SetRecord("global_step100", 1, tm.store.Get("global_step100").Info().Completed))
	// The next checkpoint begins; its pointer is written, then it is lost
	// (a restart that restores global_step100): latest names that one.
	must(os.Mkdir(filepath.Join(tm.dir, "global_step200"), 0o755))
	must(os.WriteFile(filepath.Join(tm.dir, "latest"), []byte("global_step200"), 0o644))
	must(os.Remove(filepath.Join(tm.dir, "tracker.txt")))
	// As package pointers restores them: the newest recorded checkpoint's.
	served := tm.store.ServedDatasets()
	if len(served) != 1 || served[0] != "global_step100" {
		t.Fatalf("served datasets %v, want [global_step100]", served)
	}
	ps, _, err = tm.store.DatasetPointers(served[0])
	must(err)
	tm.store.ShowPointers(ps)
	if b, err := os.ReadFile(filepath.Join(tm.dir, "latest")); err != nil || string(b) != "global_step100" {
		t.Fatalf("latest after the restore reads %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(tm.dir, "tracker.txt")); err != nil {
		t.Fatalf("tracker.txt, removed while global_step200 was written, after the restore: %v", err)
	}
}
