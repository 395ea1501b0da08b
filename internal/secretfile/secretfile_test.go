package secretfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Create makes one secret that every later Create keeps; Read refuses a
// link, a file others may read and, for root too, a file of another user.
func TestCreateAndRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "key")
	if err := Create(p, 32); err != nil {
		t.Fatal(err)
	}
	a, err := Read(p, "key")
	if err != nil || len(strings.TrimSpace(string(a))) != 64 {
		t.Fatalf("read %q, %v", a, err)
	}
	if err := Create(p, 32); err != nil {
		t.Fatal(err)
	}
	if b, _ := Read(p, "key"); string(b) != string(a) {
		t.Fatal("a second Create replaced the secret")
	}

	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(link, "key"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a link: %v", err)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(p, "key"); !errors.Is(err, ErrExposed) || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("mode 0640: %v", err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the file to another user")
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(p, "key"); !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("another user's file, read by root: %v", err)
	}
}
