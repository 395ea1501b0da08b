package peer

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestStreamRecvParts: RecvParts hands over a frame of the expected length
// in parts, in order and covering it exactly, each part's bytes already in
// place when fn sees it; a frame of another length comes back whole
// without fn; an error from fn fails the receive and breaks the stream.
func TestStreamRecvParts(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	so, sa := streamPair(t, nodes[0], nodes[1], "parts")
	ctx := ctxTimeout(t, 20*time.Second)
	const head, part = 8, 256 << 10
	sizes := []int{head + 1, head + part, head + 3*part + 12345, 4<<20 + head}
	msgs := make([][]byte, len(sizes))
	for i, n := range sizes {
		msgs[i] = make([]byte, n)
		pattern(msgs[i], uint64(i+1))
	}
	errc := make(chan error, 1)
	go func() {
		for _, m := range msgs {
			if err := so.Send(ctx, m); err != nil {
				errc <- err
				return
			}
		}
		if err := so.Send(ctx, []byte("short")); err != nil {
			errc <- err
			return
		}
		errc <- so.Send(ctx, msgs[3])
	}()
	buf := make([]byte, 0, 4<<20+head)
	for i, m := range msgs {
		var seen [][2]int
		got, err := sa.RecvParts(ctx, buf, len(m), head, part, func(lo, hi int) error {
			if !bytes.Equal(buf[lo:hi], m[lo:hi]) {
				t.Errorf("frame %d: part [%d, %d) not in place when handed over", i, lo, hi)
			}
			seen = append(seen, [2]int{lo, hi})
			return nil
		})
		if err != nil || !bytes.Equal(got, m) || &got[0] != &buf[:1][0] {
			t.Fatalf("frame %d: %d bytes, %v", i, len(got), err)
		}
		at := 0
		for j, s := range seen {
			want := min(len(m), at+part)
			if j == 0 {
				want = head
			}
			if s != [2]int{at, want} {
				t.Fatalf("frame %d: parts %v", i, seen)
			}
			at = want
		}
		if at != len(m) {
			t.Fatalf("frame %d: parts %v cover %d of %d bytes", i, seen, at, len(m))
		}
	}
	got, err := sa.RecvParts(ctx, buf, 100, head, part, func(lo, hi int) error {
		t.Error("fn called for a frame of another length")
		return nil
	})
	if err != nil || string(got) != "short" {
		t.Fatalf("other frame: %q, %v", got, err)
	}
	bad := errors.New("contribution unreadable")
	if _, err := sa.RecvParts(ctx, buf, len(msgs[3]), head, part, func(lo, hi int) error { return bad }); !errors.Is(err, bad) {
		t.Fatalf("fn's error: got %v", err)
	}
	if _, err := sa.Recv(ctx, nil); err == nil {
		t.Fatal("stream still usable after fn failed mid-frame")
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
