package peer

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// rawFrame builds a frame by hand, bypassing every check.
func rawFrame(typ byte, length uint32, payload []byte) []byte {
	b := make([]byte, headerLen, headerLen+len(payload))
	b[0], b[1], b[2] = frameMagic0, frameMagic1, typ
	binary.BigEndian.PutUint32(b[4:8], length)
	return append(b, payload...)
}

// Raw TCP clients that send garbage, a huge length, half a frame or nothing
// are dropped within the IO timeout, without allocating what they claim,
// while the server keeps serving real peers.
func TestGarbageBeforeAuth(t *testing.T) {
	checkLeaks(t)
	const ioTimeout = time.Second
	nodes := startCluster(t, 2, func(i int, c *Config) {
		c.IOTimeout = ioTimeout
		c.Handlers = map[string]Handler{"ping": func(context.Context, int, []byte) ([]byte, error) { return []byte("pong"), nil }}
	})
	srv := nodes[0]
	cases := []struct {
		name  string
		send  []byte
		stall bool   // the client then stalls: dropped by the timeout
		log   string // part of the server's log line
	}{
		{name: "http", send: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), log: "bad magic"},
		{name: "huge length", send: rawFrame(byte(ftHello), 0xFFFFFFFF, nil), log: "4294967295 bytes exceeds the 4096-byte limit"},
		{name: "unknown type", send: rawFrame(200, 10, make([]byte, 10)), log: "unknown frame type 200"},
		{name: "not a hello", send: rawFrame(byte(ftRequest), 0, nil), log: "expected a hello, got a request frame"},
		{name: "bad hello", send: rawFrame(byte(ftHello), 7, []byte{'S', 'C', 'R', 'F', 'S', 0, protocolVersion}), log: "malformed hello"},
		{name: "half a frame", send: rawFrame(byte(ftHello), 100, make([]byte, 10)), stall: true, log: "timed out after"},
		{name: "half a header", send: rawFrame(byte(ftHello), 100, nil)[:7], stall: true, log: "timed out after"},
		{name: "nothing", stall: true, log: "timed out after"},
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	// Each client comes from an address of its own: the refusal log
	// writes one line per kind of refusal and address, and only counts
	// the repeats (TestRefusalLogBounded).
	from := func(i int) string { return fmt.Sprintf("127.0.0.%d", 20+i) }
	for i, tc := range cases {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from(i))}}
			c, err := d.Dial("tcp", srv.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			start := time.Now()
			if _, err := c.Write(tc.send); err != nil {
				t.Errorf("%s: write: %v", tc.name, err)
				return
			}
			// The server must hang up; read until it does.
			_ = c.SetReadDeadline(time.Now().Add(ioTimeout + 5*time.Second))
			_, err = io.Copy(io.Discard, c)
			took := time.Since(start)
			if errors.Is(err, netTimeout) {
				t.Errorf("%s: server did not drop the connection within %v", tc.name, took)
				return
			}
			if !tc.stall && took >= ioTimeout {
				t.Errorf("%s: dropped after %v, want at once (before IOTimeout %v)", tc.name, took, ioTimeout)
			}
			if tc.stall && took < ioTimeout*9/10 {
				t.Errorf("%s: dropped after %v, before IOTimeout %v", tc.name, took, ioTimeout)
			}
		})
	}
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("garbage clients made the process allocate %d MiB", grew>>20)
	}
	for i, tc := range cases {
		srv.log.wait(t, time.Second, "dropped connection from "+from(i)+":", tc.log)
	}
	for reason, want := range map[string]float64{dropGarbage: 4, dropOversize: 1, dropTimeout: 3} {
		if got := metricValue(t, srv.reg, "scrfs_peer_dropped_total", reason); got != want {
			t.Errorf("dropped_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	// The server still serves real peers.
	resp, err := nodes[1].Call(ctxTimeout(t, 10*time.Second), 0, "ping", nil)
	if err != nil || string(resp) != "pong" {
		t.Fatalf("call after the garbage: %q, %v", resp, err)
	}
}

// netTimeout matches a net.Error timeout via errors.Is.
var netTimeout = timeoutTarget{}

type timeoutTarget struct{}

func (timeoutTarget) Error() string { return "timeout" }
func (timeoutTarget) Is(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// An authenticated peer that then sends garbage, an oversized frame, or
// nothing at all is dropped too.
func TestGarbageAfterAuth(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 2, func(i int, c *Config) {
		c.MaxFrame = 64 << 10
		c.Heartbeat = 100 * time.Millisecond
		c.IOTimeout = time.Second // idle limit: max(4 heartbeats, IOTimeout)
	})
	srv, cli := nodes[0], nodes[1]
	cases := []struct {
		name    string
		purpose purpose
		send    []byte
		log     string
	}{
		{name: "bad magic on a link", purpose: purposeLink, send: []byte("0123456789abcdef"), log: "dropped link from node 1: malformed frame: bad magic"},
		{name: "oversize on a link", purpose: purposeLink, send: rawFrame(byte(ftRequest), 64<<10+1, nil), log: "dropped link from node 1: frame too large"},
		{name: "response on a link", purpose: purposeLink, send: rawFrame(byte(ftResponse), 1, []byte{0}), log: "dropped link from node 1: malformed frame: unexpected response frame"},
		{name: "truncated kind", purpose: purposeLink, send: rawFrame(byte(ftRequest), 1, []byte{9}), log: "truncated request kind"},
		{name: "half a frame on a link", purpose: purposeLink, send: rawFrame(byte(ftRequest), 50, []byte{1, 'x'}), log: "dropped link from node 1: connection closed mid-frame"},
		{name: "garbage on a stream", purpose: purposeStream, send: rawFrame(byte(ftPing), 0, nil), log: `dropped stream "s-garbage on a stream" with node 1: malformed frame: unexpected ping frame on a stream`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := ""
			var acc chan *Stream
			if tc.purpose == purposeStream {
				id = "s-" + tc.name
				acc = make(chan *Stream, 1)
				go func() {
					s, err := srv.AcceptStream(ctxTimeout(t, 10*time.Second), 1, id)
					if err != nil {
						t.Error(err)
					}
					acc <- s
				}()
			}
			fc, err := cli.dial(ctxTimeout(t, 10*time.Second), 0, srv.Addr().String(), tc.purpose, id)
			if err != nil {
				t.Fatal(err)
			}
			defer cli.untrack(fc.c)
			if _, err := fc.c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.name == "half a frame on a link" {
				_ = fc.c.CloseWrite()
			}
			if acc != nil {
				s := <-acc
				if s == nil {
					return
				}
				defer s.Close()
				if _, err := s.Recv(ctxTimeout(t, 10*time.Second), nil); !errors.Is(err, ErrBadFrame) {
					t.Fatalf("recv of garbage: %v, want ErrBadFrame", err)
				}
				if _, err := s.Recv(ctxTimeout(t, 10*time.Second), nil); !errors.Is(err, ErrStreamBroken) {
					t.Fatalf("recv after garbage: %v, want ErrStreamBroken", err)
				}
			}
			srv.log.wait(t, 5*time.Second, tc.log)
			_ = fc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.Copy(io.Discard, fc.c); errors.Is(err, netTimeout) {
				t.Fatal("server kept the connection open")
			}
		})
	}
	t.Run("silent link", func(t *testing.T) {
		fc, err := cli.dial(ctxTimeout(t, 10*time.Second), 0, srv.Addr().String(), purposeLink, "")
		if err != nil {
			t.Fatal(err)
		}
		defer cli.untrack(fc.c)
		start := time.Now()
		_ = fc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, fc.c); errors.Is(err, netTimeout) {
			t.Fatal("server kept a silent link open")
		}
		if took := time.Since(start); took < 900*time.Millisecond {
			t.Fatalf("silent link dropped after %v, before the 1s idle limit", took)
		}
	})
	if got := metricValue(t, srv.reg, "scrfs_peer_dropped_total", dropTimeout); got < 1 {
		t.Errorf("dropped_total{reason=timeout} = %v, want >= 1", got)
	}
}

// fakeServer accepts connections on a fresh loopback listener, completes the
// real handshake as node self of job with secret, and passes each
// authenticated connection to serve. It stops at test cleanup.
func fakeServer(t *testing.T, self int, serve func(fc *frameConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.9:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				fc := newFrameConn(c.(*net.TCPConn), 5*time.Second)
				_, msg, err := fc.readFrameTimed(nil)
				if err != nil {
					return
				}
				var nonceS [nonceLen]byte
				_, _ = rand.Read(nonceS[:])
				_, _ = fc.writeFrame(ftChallenge, 0, nonceS[:], transcriptMAC(testSecret, roleServer, msg, nonceS[:]))
				if _, _, err := fc.readFrameTimed(nil); err != nil {
					return
				}
				_, _ = fc.writeFrame(ftVerdict, 0, []byte{verdictAccept})
				fc.maxLen = DefaultMaxFrame
				_ = fc.c.SetDeadline(time.Time{})
				serve(fc)
			})
		}
	})
	return ln.Addr().String()
}

// A server that authenticates and then answers nothing (no pongs) is
// declared down after the idle limit, and one that sends garbage is dropped.
func TestLinkDropsMisbehavingServer(t *testing.T) {
	checkLeaks(t)
	silent := fakeServer(t, 1, func(fc *frameConn) {
		_ = fc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.Copy(io.Discard, fc.c) // swallow pings, never answer
	})
	noisy := fakeServer(t, 2, func(fc *frameConn) {
		_, _ = fc.c.Write([]byte("this is not a frame at all"))
		_ = fc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.Copy(io.Discard, fc.c)
	})
	cfg := testConfig(0, 3)
	cfg.Heartbeat = 100 * time.Millisecond
	cfg.IOTimeout = time.Second
	cfg.Addrs[1], cfg.Addrs[2] = silent, noisy
	n := startNode(t, cfg)
	n.Connect([]int{1, 2})
	n.log.wait(t, 10*time.Second, "link to node 1 at "+silent+" down: nothing heard from node 1 for 1s")
	n.log.wait(t, 10*time.Second, "dropped link to node 2: malformed frame: bad magic")
	if got := metricValue(t, n.reg, "scrfs_peer_dropped_total", dropGarbage); got < 1 {
		t.Errorf("dropped_total{reason=garbage} = %v, want >= 1", got)
	}
}
