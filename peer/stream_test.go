package peer

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// streamPair opens a stream from a to b (Open before Accept) and returns
// both ends, closed at cleanup.
func streamPair(t *testing.T, a, b *testNode, id string) (*Stream, *Stream) {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	so, err := a.OpenStream(ctx, b.Self(), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = so.Close() })
	sa, err := b.AcceptStream(ctx, a.Self(), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sa.Close() })
	if sa.Peer() != a.Self() || sa.ID() != id || so.Peer() != b.Self() {
		t.Fatalf("stream identity: accepted %d/%q, opened %d", sa.Peer(), sa.ID(), so.Peer())
	}
	return so, sa
}

// pump sends frames 1 MiB frames with pattern seeds base..base+frames-1.
func pump(ctx context.Context, s *Stream, base uint64, frames int, size int) error {
	buf := make([]byte, size)
	for i := range frames {
		pattern(buf, base+uint64(i))
		if err := s.Send(ctx, buf); err != nil {
			return err
		}
	}
	return nil
}

// drain receives frames and checks each byte, then expects io.EOF.
func drain(t *testing.T, ctx context.Context, s *Stream, base uint64, frames int, size int) {
	buf := make([]byte, size)
	scratch := make([]byte, size)
	for i := range frames {
		p, err := s.Recv(ctx, buf)
		if err != nil {
			t.Errorf("recv frame %d: %v", i, err)
			return
		}
		if len(p) != size {
			t.Errorf("frame %d has %d bytes, want %d", i, len(p), size)
			return
		}
		if &p[0] != &buf[0] {
			t.Errorf("frame %d not received into the caller's buffer", i)
		}
		checkPattern(t, p, base+uint64(i), scratch)
	}
}

// Both directions at once over one stream, and a second stream the other
// way, with 1 MiB frames checked byte for byte.
func TestStreamBothDirections(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	frames := 32
	if testing.Short() {
		frames = 8
	}
	const size = 1 << 20
	ctx := ctxTimeout(t, 30*time.Second)
	ab, ba := streamPair(t, nodes[0], nodes[1], "duplex")
	rev1, rev0 := streamPair(t, nodes[1], nodes[0], "reverse")

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Go(func() { errs <- pump(ctx, ab, 0, frames, size) })
	wg.Go(func() { errs <- pump(ctx, ba, 1000, frames, size) })
	wg.Go(func() { errs <- pump(ctx, rev1, 2000, frames, size) })
	wg.Go(func() { drain(t, ctx, ba, 0, frames, size) })
	wg.Go(func() { drain(t, ctx, ab, 1000, frames, size) })
	wg.Go(func() { drain(t, ctx, rev0, 2000, frames, size) })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Odd sizes, an empty frame, and a frame larger than the buffer.
	for _, n := range []int{0, 1, 17, 65537, 3 << 20} {
		b := make([]byte, n)
		pattern(b, uint64(n))
		if err := ab.Send(ctx, b); err != nil {
			t.Fatal(err)
		}
		p, err := ba.Recv(ctx, make([]byte, 0, 100))
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != n {
			t.Fatalf("frame of %d bytes arrived as %d", n, len(p))
		}
		checkPattern(t, p, uint64(n), make([]byte, n))
	}
	if err := ab.Send(ctx, make([]byte, DefaultMaxFrame+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized send: %v", err)
	}
	// A clean close reads as io.EOF on the other end.
	_ = ab.Close()
	if _, err := ba.Recv(ctx, nil); !errors.Is(err, io.EOF) {
		t.Fatalf("recv after peer closed: %v, want io.EOF", err)
	}
	if err := ab.Send(ctx, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("send on a closed stream: %v, want ErrClosed", err)
	}
	// Node 0 sent one stream's frames, node 1 two streams' worth.
	if got := metricValue(t, nodes[0].reg, "scrfs_peer_sent_bytes_total", "1"); got < float64(frames*size) {
		t.Errorf("node 0 sent_bytes_total{peer=1} = %v, want >= %d", got, frames*size)
	}
	if got := metricValue(t, nodes[0].reg, "scrfs_peer_received_bytes_total", "1"); got < float64(2*frames*size) {
		t.Errorf("node 0 received_bytes_total{peer=1} = %v, want >= %d", got, 2*frames*size)
	}
}

func TestAcceptBeforeOpen(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	ctx := ctxTimeout(t, 10*time.Second)
	got := make(chan *Stream, 1)
	go func() {
		s, err := nodes[1].AcceptStream(ctx, 0, "early-accept")
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	// Wait until the accept is registered, so the open really comes second.
	testutil.Eventually(t, 10*time.Second, "the accept registered", func() bool {
		nodes[1].mu.Lock()
		defer nodes[1].mu.Unlock()
		return nodes[1].waiters[streamKey{0, "early-accept"}] != nil
	})
	so, err := nodes[0].OpenStream(ctx, 1, "early-accept")
	if err != nil {
		t.Fatal(err)
	}
	defer so.Close()
	sa := <-got
	if sa == nil {
		t.FailNow()
	}
	defer sa.Close()
	if err := so.Send(ctx, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if p, err := sa.Recv(ctx, nil); err != nil || string(p) != "first" {
		t.Fatalf("recv %q, %v", p, err)
	}
	// A second accept for the same (peer, id) while one waits is refused.
	go func() { _, _ = nodes[1].AcceptStream(ctxTimeout(t, 10*time.Second), 0, "dup") }()
	testutil.Eventually(t, 10*time.Second, "the first accept of dup registered", func() bool {
		nodes[1].mu.Lock()
		defer nodes[1].mu.Unlock()
		return nodes[1].waiters[streamKey{0, "dup"}] != nil
	})
	if _, err := nodes[1].AcceptStream(ctx, 0, "dup"); !errors.Is(err, ErrDuplicateStream) {
		t.Fatalf("second accept: %v, want ErrDuplicateStream", err)
	}
}

func TestOpenBeforeAccept(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	ctx := ctxTimeout(t, 10*time.Second)
	so, err := nodes[0].OpenStream(ctx, 1, "early-open")
	if err != nil {
		t.Fatal(err)
	}
	defer so.Close()
	// The opener may send before the accept: the bytes wait in the socket.
	if err := so.Send(ctx, []byte("before accept")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the open held for its accept", func() bool {
		nodes[1].mu.Lock()
		defer nodes[1].mu.Unlock()
		return nodes[1].held[streamKey{0, "early-open"}] != nil
	})
	// A second open with the same id while the first is held is refused.
	if _, err := nodes[0].OpenStream(ctx, 1, "early-open"); !errors.Is(err, ErrDuplicateStream) {
		t.Fatalf("duplicate open: %v, want ErrDuplicateStream", err)
	}
	sa, err := nodes[1].AcceptStream(ctx, 0, "early-open")
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	if p, err := sa.Recv(ctx, nil); err != nil || string(p) != "before accept" {
		t.Fatalf("recv %q, %v", p, err)
	}
	// Ring pattern: each node opens to the other before accepting.
	s01, err := nodes[0].OpenStream(ctx, 1, "ring")
	if err != nil {
		t.Fatal(err)
	}
	defer s01.Close()
	s10, err := nodes[1].OpenStream(ctx, 0, "ring")
	if err != nil {
		t.Fatal(err)
	}
	defer s10.Close()
	for _, a := range []struct {
		n    *testNode
		from int
	}{{nodes[0], 1}, {nodes[1], 0}} {
		s, err := a.n.AcceptStream(ctx, a.from, "ring")
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
	}
}

// A stream nobody accepts is dropped after StreamHold, with a log line.
func TestStreamHoldExpires(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, func(i int, c *Config) { c.StreamHold = 200 * time.Millisecond })
	ctx := ctxTimeout(t, 10*time.Second)
	so, err := nodes[0].OpenStream(ctx, 1, "orphan")
	if err != nil {
		t.Fatal(err)
	}
	defer so.Close()
	nodes[1].log.wait(t, 5*time.Second, `dropped stream "orphan" from node 0: not accepted within 200ms (StreamHold)`)
	if _, err := so.Recv(ctx, nil); err == nil {
		t.Fatal("recv on a dropped stream succeeded")
	}
	if _, err := nodes[1].AcceptStream(ctxTimeout(t, 100*time.Millisecond), 0, "orphan"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("accept after the hold expired: %v, want DeadlineExceeded", err)
	}
	if got := metricValue(t, nodes[1].reg, "scrfs_peer_dropped_total", dropUnclaimed); got != 1 {
		t.Fatalf("dropped_total{reason=unclaimed} = %v, want 1", got)
	}
}

// Cancelling ctx unblocks a Recv waiting for a frame (the IO timeout is far
// away), and leaves the stream broken.
func TestRecvCancel(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, func(i int, c *Config) { c.IOTimeout = time.Minute })
	so, sa := streamPair(t, nodes[0], nodes[1], "idle")
	_ = so
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := sa.Recv(ctx, nil)
		done <- err
	}()
	// Cancel once Recv watches ctx (it then reads, or fails at once on the
	// past deadline: either way the cancellation lands mid-call).
	testutil.Eventually(t, 10*time.Second, "Recv watching its context", func() bool {
		sa.rw.mu.Lock()
		defer sa.rw.mu.Unlock()
		return sa.rw.done != nil
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled recv: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not unblock Recv")
	}
	// A ctx that is already done returns at once without breaking anything;
	// one that ended mid-call did break the stream.
	if _, err := sa.Recv(ctx, nil); !errors.Is(err, ErrStreamBroken) {
		t.Fatalf("recv after a cancelled recv: %v, want ErrStreamBroken", err)
	}
	if err := so.Send(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("send with a done ctx: %v, want context.Canceled", err)
	}
	if err := so.Send(context.Background(), []byte("x")); err != nil {
		t.Fatalf("send after a refused done ctx: %v", err)
	}
	// A deadline ctx that ends while Recv waits.
	so2, sa2 := streamPair(t, nodes[0], nodes[1], "idle2")
	_ = so2
	start := time.Now()
	if _, err := sa2.Recv(ctxTimeout(t, 100*time.Millisecond), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("recv past its deadline: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("recv with a 100ms ctx took %v", took)
	}
	// AcceptStream honours ctx too.
	if _, err := nodes[1].AcceptStream(ctxTimeout(t, 50*time.Millisecond), 0, "nobody"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("accept past its deadline: %v", err)
	}
}

// Reusing one ctx across many frames keeps working after the ctx changes.
func TestStreamCtxSwitch(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	so, sa := streamPair(t, nodes[0], nodes[1], "switch")
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := so.Send(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		p, err := sa.Recv(ctx, nil)
		cancel() // fires the old watcher after the call: must not break the next one
		if err != nil || len(p) != 1 || p[0] != byte(i) {
			t.Fatalf("frame %d: %v %v", i, p, err)
		}
	}
}

// A peer that stops reading makes Send fail by the IO timeout, not hang.
func TestSendTimeoutWhenPeerStopsReading(t *testing.T) {
	checkLeaks(t)
	const ioTimeout = 500 * time.Millisecond
	nodes := startCluster(t, 2, func(i int, c *Config) { c.IOTimeout = ioTimeout })
	so, _ := streamPair(t, nodes[0], nodes[1], "stuck") // accepted, never read
	buf := make([]byte, 1<<20)
	start := time.Now()
	var err error
	frames := 0
	for ; frames < 1000 && err == nil; frames++ {
		err = so.Send(context.Background(), buf)
	}
	took := time.Since(start)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("send to a peer that does not read: %v after %d frames, want a deadline error", err, frames)
	}
	if took < ioTimeout || took > ioTimeout+10*time.Second {
		t.Fatalf("send failed after %v, want about IOTimeout %v", took, ioTimeout)
	}
	if err := so.Send(context.Background(), buf); !errors.Is(err, ErrStreamBroken) {
		t.Fatalf("send after a timeout: %v, want ErrStreamBroken", err)
	}
	t.Logf("blocked after %d MiB, failed after %v", frames-1, took)
}

// Closing a Node closes its streams.
func TestNodeCloseClosesStreams(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, nil)
	_, sa := streamPair(t, nodes[0], nodes[1], "s")
	done := make(chan error, 1)
	go func() {
		_, err := sa.Recv(context.Background(), nil)
		done <- err
	}()
	_ = nodes[1].Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("recv on a stream of a closed node: %v, want ErrClosed", err)
	}
}

// Cancelling ctx unblocks a Send stuck on a peer that does not read, long
// before the IO timeout.
func TestSendCancel(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, func(i int, c *Config) { c.IOTimeout = time.Minute })
	so, _ := streamPair(t, nodes[0], nodes[1], "stuck")
	ctx := ctxTimeout(t, 300*time.Millisecond)
	buf := make([]byte, 1<<20)
	start := time.Now()
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = so.Send(ctx, buf)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send past its ctx deadline: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("cancelled send returned after %v", took)
	}
	if err := so.Send(context.Background(), buf); !errors.Is(err, ErrStreamBroken) {
		t.Fatalf("send after a cancelled send: %v, want ErrStreamBroken", err)
	}
}
