package peer

import (
	"context"
	"io"
	"testing"
	"time"
)

const benchFrame = 1 << 20

// reportGiBs reports throughput in GiB/s next to the MB/s SetBytes gives.
func reportGiBs(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)*benchFrame/time.Since(start).Seconds()/(1<<30), "GiB/s")
}

// BenchmarkStream pushes 1 MiB frames one way over a peer stream on
// loopback, receiving into one reused buffer.
func BenchmarkStream(b *testing.B) {
	nodes := startCluster(b, 2, nil)
	ctx := context.Background()
	so, err := nodes[0].OpenStream(ctx, 1, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer so.Close()
	sa, err := nodes[1].AcceptStream(ctx, 0, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	const warm = 256 // untimed: fault in buffers, grow TCP windows
	sendBuf, recvBuf := make([]byte, benchFrame), make([]byte, benchFrame)
	pattern(sendBuf, 1)
	sent := make(chan error, 1)
	go func() {
		for range warm + b.N {
			if err := so.Send(ctx, sendBuf); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	for range warm {
		if _, err := sa.Recv(ctx, recvBuf); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(benchFrame)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := sa.Recv(ctx, recvBuf); err != nil {
			b.Fatal(err)
		}
	}
	reportGiBs(b, start)
	b.StopTimer()
	if err := <-sent; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStreamCancelCtx is BenchmarkStream with a cancellable ctx on
// both ends, to show the per-ctx (not per-frame) watcher costs nothing.
func BenchmarkStreamCancelCtx(b *testing.B) {
	nodes := startCluster(b, 2, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	so, err := nodes[0].OpenStream(ctx, 1, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer so.Close()
	sa, err := nodes[1].AcceptStream(ctx, 0, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	const warm = 64
	sendBuf, recvBuf := make([]byte, benchFrame), make([]byte, benchFrame)
	sent := make(chan error, 1)
	go func() {
		for range warm + b.N {
			if err := so.Send(ctx, sendBuf); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	for range warm {
		if _, err := sa.Recv(ctx, recvBuf); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(benchFrame)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := sa.Recv(ctx, recvBuf); err != nil {
			b.Fatal(err)
		}
	}
	reportGiBs(b, start)
	b.StopTimer()
	if err := <-sent; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPlainTCP is the baseline: the same bytes over a bare loopback
// TCP pair with default socket options, no framing, no deadlines.
func BenchmarkPlainTCP(b *testing.B) {
	a, c := tcpPair(b)
	const warm = 256
	sendBuf, recvBuf := make([]byte, benchFrame), make([]byte, benchFrame)
	pattern(sendBuf, 1)
	sent := make(chan error, 1)
	go func() {
		for range warm + b.N {
			if _, err := a.Write(sendBuf); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	for range warm {
		if _, err := io.ReadFull(c, recvBuf); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(benchFrame)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := io.ReadFull(c, recvBuf); err != nil {
			b.Fatal(err)
		}
	}
	reportGiBs(b, start)
	b.StopTimer()
	if err := <-sent; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCall measures a small request/response round trip on a link.
func BenchmarkCall(b *testing.B) {
	nodes := startCluster(b, 2, func(i int, c *Config) {
		c.Handlers = map[string]Handler{"echo": func(_ context.Context, _ int, req []byte) ([]byte, error) { return req, nil }}
	})
	ctx := context.Background()
	req := make([]byte, 64)
	for range 100 {
		if _, err := nodes[0].Call(ctx, 1, "echo", req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := nodes[0].Call(ctx, 1, "echo", req); err != nil {
			b.Fatal(err)
		}
	}
}
