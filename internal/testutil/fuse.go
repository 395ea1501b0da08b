package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// RequireFUSE skips a test that needs a kernel FUSE mount where none can be
// made, saying why: no /dev/fuse, or no fusermount3 for a user other than
// root.
func RequireFUSE(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("/dev/fuse not available")
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			t.Skip("fusermount3 not found (apt-get install fuse3)")
		}
	}
}
