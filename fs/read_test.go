package fs

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// lockedBuffer is a bytes.Buffer the mount's goroutines may write while
// a test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLargeReads reads a file through the daemon (no passthrough) with
// reads of 1 MiB, the largest the kernel sends, through the page cache
// and with O_DIRECT. They must return the file's bytes, and without a
// warning: a 1 MiB reply does not fit the largest pipe Linux gives by
// default, and go-fuse logged each splice it gave up on.
func TestLargeReads(t *testing.T) {
	var warnings lockedBuffer
	tm := mountTest(t, mountConfig{passthrough: "off", warnings: &warnings})
	data := make([]byte, 4<<20+12345)
	rand.Read(data)
	p := filepath.Join(tm.dir, "ds", "big")
	if err := os.Mkdir(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read through the page cache: %d bytes, equal %v, %v", len(got), bytes.Equal(got, data), err)
	}

	// O_DIRECT: every read goes to the daemon as the application asks it.
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page-aligned, as O_DIRECT wants
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	var direct []byte
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatalf("O_DIRECT read at %d: %v", len(direct), err)
		}
		if n == 0 {
			break
		}
		direct = append(direct, buf[:n]...)
	}
	if !bytes.Equal(direct, data) {
		t.Fatalf("O_DIRECT reads returned %d bytes, not the file's %d", len(direct), len(data))
	}
	if w := warnings.String(); strings.Contains(w, "splice") {
		t.Fatalf("the mount warned while serving reads:\n%s", w)
	}
}
