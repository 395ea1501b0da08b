package peer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestStreamLowWaterMark: bulk reads wait for a low-water mark, which must
// never exceed what the frame still owes. Frames of sizes around the marks
// go one at a time (the sender waits for an answer before the next, so no
// later byte can satisfy a mark set too high), through Recv and RecvToFile;
// each must arrive well before the I/O timeout, and small frames after
// large ones must not wait either.
func TestStreamLowWaterMark(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	so, sa := streamPair(t, nodes[0], nodes[1], "lowat")
	ctx := ctxTimeout(t, 20*time.Second)
	out, err := os.CreateTemp(t.TempDir(), "dst")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	sizes := []int{lowatMax + 123457, 17, lowatMin + 1, 3, 3*lowatMax + 5, lowatMin - 1, lowatMax, 1}
	// The sender must have read the last answer before the test's cleanup
	// closes the nodes under it.
	sent := make(chan struct{})
	defer func() { <-sent }()
	go func() {
		defer close(sent)
		for i, n := range sizes {
			b := make([]byte, n)
			pattern(b, uint64(i))
			if err := so.SendParts(ctx, []byte{byte(i)}, b); err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
			if _, err := so.Recv(ctx, nil); err != nil {
				t.Errorf("answer %d: %v", i, err)
				return
			}
		}
	}()
	head := make([]byte, 1)
	for i, n := range sizes {
		start := time.Now()
		var got []byte
		if i%2 == 0 {
			if _, err := sa.RecvToFile(ctx, head, out, 0, n); err != nil {
				t.Fatalf("frame %d (%d bytes) to file: %v", i, n, err)
			}
			got = make([]byte, n)
			if _, err := out.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
		} else {
			p, err := sa.Recv(ctx, nil)
			if err != nil {
				t.Fatalf("frame %d (%d bytes): %v", i, n, err)
			}
			head[0], got = p[0], p[1:]
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("frame %d (%d bytes) took %v: a read waited for bytes the frame did not owe", i, n, d)
		}
		if head[0] != byte(i) {
			t.Fatalf("frame %d: head %d", i, head[0])
		}
		checkPattern(t, got, uint64(i), make([]byte, n))
		if err := sa.Send(ctx, []byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStreamLowWaterMarkTrickle: a frame whose tail arrives late, after
// RecvToFile drained the socket, must wake it although the tail is below
// the mark the frame started with.
func TestStreamLowWaterMarkTrickle(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	so, sa := streamPair(t, nodes[0], nodes[1], "trickle")
	ctx := ctxTimeout(t, 20*time.Second)
	out, err := os.CreateTemp(t.TempDir(), "dst")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	const n, first = lowatMax + 200<<10, lowatMax - 100<<10
	payload := make([]byte, n)
	pattern(payload, 3)
	go func() {
		var hdr [headerLen]byte
		putHeader(&hdr, header{typ: ftData, length: 1 + n})
		so.fc.wmu.Lock()
		defer so.fc.wmu.Unlock()
		for _, part := range [][]byte{hdr[:], {7}, payload[:first], nil, payload[first:]} {
			if part == nil {
				time.Sleep(300 * time.Millisecond) // the reader drains and waits
				continue
			}
			if _, err := so.fc.c.Write(part); err != nil {
				t.Errorf("write: %v", err)
				return
			}
		}
	}()
	start := time.Now()
	head := make([]byte, 1)
	if _, err := sa.RecvToFile(ctx, head, out, 0, n); err != nil {
		t.Fatalf("recv after %v: %v", time.Since(start), err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("frame took %v: the tail waited for a mark above it", d)
	}
	got := make([]byte, n)
	if _, err := out.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if head[0] != 7 {
		t.Fatalf("head %d", head[0])
	}
	checkPattern(t, got, 3, make([]byte, n))
}

// TestStreamFileFallback: where the kernel refuses to splice — from the
// socket into the pipe, or from the pipe into the file once bytes are in
// the pipe — RecvToFile falls back to reads and writes within the same
// frame, loses no byte, and FileIO says "copy".
func TestStreamFileFallback(t *testing.T) {
	for _, c := range []struct {
		name string
		// refuse reports whether a splice from in (nil offset: the socket
		// or the pipe's read end) should fail; into says whether it is the
		// pipe → file half.
		refuse func(into bool, calls int) bool
	}{
		{"socket to pipe", func(into bool, calls int) bool { return !into }},
		{"pipe to file", func(into bool, calls int) bool { return into && calls > 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls int
			splice = func(rfd int, roff *int64, wfd int, woff *int64, n int, flags int) (int64, error) {
				into := woff != nil
				if into {
					calls++
				}
				if c.refuse(into, calls) {
					return 0, unix.EINVAL
				}
				return unix.Splice(rfd, roff, wfd, woff, n, flags)
			}
			t.Cleanup(func() { splice = unix.Splice })

			nodes := startCluster(t, 2, nil)
			so, sa := streamPair(t, nodes[0], nodes[1], "fallback")
			ctx := ctxTimeout(t, 20*time.Second)
			out, err := os.OpenFile(filepath.Join(t.TempDir(), "dst"), os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			const piece, n = 1<<20 + 77, 5
			src := make([]byte, piece*n)
			pattern(src, 11)
			errc := make(chan error, 1)
			go func() {
				for i := range n {
					if err := so.SendParts(ctx, []byte{byte(i)}, src[i*piece:(i+1)*piece]); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			head := make([]byte, 1)
			for i := range n {
				got, err := sa.RecvToFile(ctx, head, out, int64(i*piece), piece)
				if err != nil || &got[0] != &head[0] || got[0] != byte(i) {
					t.Fatalf("piece %d: %v, %v", i, got, err)
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			dst := make([]byte, len(src))
			if _, err := out.ReadAt(dst, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst, src) {
				t.Fatal("file bytes differ after the fallback")
			}
			if sa.FileIO() != "copy" {
				t.Errorf("FileIO %q, want copy", sa.FileIO())
			}
		})
	}
}
