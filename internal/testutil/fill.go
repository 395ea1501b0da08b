package testutil

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Fill writes a file into dir until its file system has no block left
// (ENOSPC), as another job filling a shared /dev/shm would; free removes
// it. File systems that reserve blocks for writes not yet allocated (ext4's
// delayed allocation) give some back once the data is on disk, so it syncs
// and fills again until nothing more fits.
func Fill(t testing.TB, dir string) (free func()) {
	t.Helper()
	f, err := os.CreateTemp(dir, "scrfs-test-filler-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := f.Name()
	buf := make([]byte, 4096)
	for wrote := true; wrote; {
		wrote = false
		for {
			if _, err = f.Write(buf); err != nil {
				break
			}
			wrote = true
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
		}
		f.Sync()
	}
	return func() {
		t.Helper()
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
}

// MountTmpfs mounts a tmpfs with options opts ("size=1m") on a new
// directory and returns it, unmounted when the test ends; it skips the
// test, saying why, where mounting is not allowed (not root).
func MountTmpfs(t testing.TB, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}
