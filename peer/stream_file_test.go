package peer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStreamFileTransfer moves frames between files and streams every way
// the bulk paths allow, interleaved with plain frames, and checks every
// byte: SendParts → RecvToFile (splice), SendParts → Recv, a frame of
// another length reaching RecvToFile whole, and offsets that are not
// page-aligned.
func TestStreamFileTransfer(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	so, sa := streamPair(t, nodes[0], nodes[1], "files")
	ctx := ctxTimeout(t, 20*time.Second)
	dir := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "scrfs-peer-"); err == nil {
			dir = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	const size = 3<<20 + 12345
	src := make([]byte, size)
	pattern(src, 7)
	out, err := os.OpenFile(filepath.Join(dir, "dst"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()

	// Pieces of odd sizes at odd offsets, each with a 5-byte head.
	type piece struct{ off, n int }
	var ps []piece
	for off, n := 0, 1; off < size; off, n = off+n, n*3+1000 {
		ps = append(ps, piece{off, min(n, size-off)})
	}
	errc := make(chan error, 1)
	go func() {
		for i, p := range ps {
			head := []byte{byte(i), 1, 2, 3, 4}
			if err := so.SendParts(ctx, head, src[p.off:p.off+p.n]); err != nil {
				errc <- err
				return
			}
		}
		// A plain frame where RecvToFile expects a piece, then parts.
		if err := so.Send(ctx, []byte("not a piece")); err != nil {
			errc <- err
			return
		}
		errc <- so.SendParts(ctx, []byte("ab"), src[:100], []byte("yz"))
	}()
	head := make([]byte, 5)
	for i, p := range ps {
		got, err := sa.RecvToFile(ctx, head, out, int64(p.off)+1, p.n)
		if err != nil {
			t.Fatalf("piece %d: %v", i, err)
		}
		if &got[0] != &head[0] || got[0] != byte(i) || !bytes.Equal(got[1:], []byte{1, 2, 3, 4}) {
			t.Fatalf("piece %d: head %v", i, got)
		}
	}
	got, err := sa.RecvToFile(ctx, head, out, 0, 1000)
	if err != nil || string(got) != "not a piece" {
		t.Fatalf("other frame through RecvToFile: %q, %v", got, err)
	}
	got, err = sa.Recv(ctx, nil)
	if err != nil || !bytes.Equal(got, append(append([]byte("ab"), src[:100]...), "yz"...)) {
		t.Fatalf("SendParts frame: %d bytes, %v", len(got), err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, size)
	if _, err := out.ReadAt(dst, 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("file bytes differ after the transfer")
	}
	if sa.FileIO() != "kernel" {
		t.Errorf("FileIO %q, want kernel (splice) on Linux with tmpfs", sa.FileIO())
	}
}
