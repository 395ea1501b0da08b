package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// refusalCase starts node 0 (good) and node 1 (tweaked), makes node 1 call
// node 0 and node 0 call node 1, and checks that both calls fail, no handler
// ran, and both sides logged the refusal.
func TestRefusals(t *testing.T) {
	cases := []struct {
		name        string
		tweak       func(c *Config)
		wantErr     error
		serverLine  string // what the refusing server logs after "claiming node N: "
		clientLine  string // what the refused client logs after "refused us: "
		metricLabel string
	}{
		{
			name:        "wrong secret",
			tweak:       func(c *Config) { c.Secret = []byte("another secret, 16+ bytes") },
			wantErr:     ErrAuth,
			serverLine:  "authentication failed (wrong job secret?)",
			clientLine:  "authentication failed (wrong job secret?)",
			metricLabel: "secret",
		},
		{
			name:        "wrong job",
			tweak:       func(c *Config) { c.Job = "other-job" },
			wantErr:     ErrRefused,
			serverLine:  `job "other-job" is not our job "job-test"`,
			clientLine:  `job "other-job" is not this node's job`,
			metricLabel: "job",
		},
		{
			name:        "other terms",
			tweak:       func(c *Config) { c.Terms = "rs parity=2 nodes=2" },
			wantErr:     ErrTerms,
			serverLine:  `node 1 runs the job with "rs parity=2 nodes=2", this node with ""`,
			clientLine:  `node 1 runs the job with "rs parity=2 nodes=2", this node with ""`,
			metricLabel: "terms",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			var ran atomic.Int32
			h := map[string]Handler{"x": func(context.Context, int, []byte) ([]byte, error) {
				ran.Add(1)
				return nil, nil
			}}
			nodes := startCluster(t, 2, func(i int, c *Config) {
				c.Handlers = h
				if i == 1 {
					tc.tweak(c)
				}
			})
			good, bad := nodes[0], nodes[1]
			goodAddr, badAddr := good.Addr().String(), bad.Addr().String()

			// The bad node calls the good one.
			_, err := bad.Call(ctxTimeout(t, time.Second), 0, "x", nil)
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("call from the bad node: %v, want %v after retrying until the deadline", err, tc.wantErr)
			}
			// Server side: "refused connection from 127.0.0.2:40122 claiming node 1: ..."
			good.log.wait(t, 5*time.Second, "refused connection from 127.0.0.2:", "claiming node 1: "+tc.serverLine)
			// Client side: "node 0 at 127.0.0.1:7411 refused us: ..."
			bad.log.wait(t, 5*time.Second, fmt.Sprintf("node 0 at %s refused us: %s", goodAddr, tc.clientLine))

			// The good node calls the bad one: refused the other way.
			_, err = good.Call(ctxTimeout(t, time.Second), 1, "x", nil)
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("call to the bad node: %v, want ErrRefused", err)
			}
			good.log.wait(t, 5*time.Second, fmt.Sprintf("node 1 at %s refused us:", badAddr))

			if n := ran.Load(); n != 0 {
				t.Fatalf("%d handlers ran for an unauthenticated peer", n)
			}
			for _, n := range nodes {
				if got := metricValue(t, n.reg, "scrfs_peer_auth_failures_total", tc.metricLabel); got < 1 {
					t.Errorf("node %d auth_failures_total{reason=%q} = %v, want >= 1", n.Self(), tc.metricLabel, got)
				}
				for _, l := range n.Links() {
					if l.Up {
						t.Errorf("node %d: link to %d is up", n.Self(), l.Peer)
					}
				}
			}
			// Neither node got data through: no stream either.
			_, err = bad.OpenStream(ctxTimeout(t, 2*time.Second), 0, "s")
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("open stream from the bad node: %v, want ErrRefused", err)
			}
		})
	}
}

// A node that dials an address now used by another node index is refused
// by the node that is there.
func TestWrongNodeRefused(t *testing.T) {
	checkLeaks(t)
	nodes := startCluster(t, 3, nil)
	// Node 0 believes node 2 lives at node 1's address.
	if err := nodes[0].SetAddr(2, nodes[1].Addr().String()); err != nil {
		t.Fatal(err)
	}
	_, err := nodes[0].Call(ctxTimeout(t, time.Second), 2, "x", nil)
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != refuseNode {
		t.Fatalf("call to the wrong node: %v, want a node refusal", err)
	}
	nodes[1].log.wait(t, 5*time.Second, "claiming node 0: it dialled node 2 but we are node 1")
	nodes[0].log.wait(t, 5*time.Second, "refused us: this is node 1, not node 2")
}

// A client speaking another protocol version is refused with a message
// naming both versions.
func TestVersionRefused(t *testing.T) {
	checkLeaks(t)
	n := startNode(t, testConfig(0, 2))
	c, err := net.Dial("tcp", n.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := hello{version: protocolVersion + 1, purpose: purposeLink, from: 1, job: "job-test"}
	b := appendHello(nil, &h)
	var hdr [headerLen]byte
	putHeader(&hdr, header{typ: ftHello, length: uint32(len(b))})
	if _, err := c.Write(append(hdr[:], b...)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rh, msg, err := readFrame(c, &hdr, handshakeMaxFrame, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rh.typ != ftVerdict || len(msg) < 1 || msg[0] != refuseVersion {
		t.Fatalf("answer %v %q, want a version refusal", rh.typ, msg)
	}
	n.log.wait(t, 5*time.Second, fmt.Sprintf("protocol version %d not supported (we speak %d)", protocolVersion+1, protocolVersion))
	if got := metricValue(t, n.reg, "scrfs_peer_auth_failures_total", "version"); got != 1 {
		t.Errorf("auth_failures_total{reason=version} = %v, want 1", got)
	}
}

// A server that accepts anyone without knowing the secret is caught by the
// client: its MAC does not verify, so the client drops it even though it
// "accepted" us.
func TestClientRejectsImpostorServer(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			impostor(c)
		}
	}()
	cfg := testConfig(0, 2)
	cfg.Addrs[1] = ln.Addr().String()
	n := startNode(t, cfg)
	_, err = n.OpenStream(ctxTimeout(t, time.Second), 1, "s")
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("open stream to an impostor: %v, want ErrAuth", err)
	}
	n.log.wait(t, 5*time.Second, "accepted us without proving the job secret")
}

// impostor plays a server that accepts any client without the secret.
func impostor(c net.Conn) {
	defer c.Close()
	var hdr [headerLen]byte
	if _, _, err := readFrame(c, &hdr, handshakeMaxFrame, nil); err != nil {
		return
	}
	// A challenge with a made-up MAC, then an accept.
	junk := make([]byte, nonceLen+macLen)
	putHeader(&hdr, header{typ: ftChallenge, length: uint32(len(junk))})
	_, _ = c.Write(append(hdr[:], junk...))
	if _, _, err := readFrame(c, &hdr, handshakeMaxFrame, nil); err != nil {
		return
	}
	putHeader(&hdr, header{typ: ftVerdict, length: 1})
	_, _ = c.Write(append(hdr[:], verdictAccept))
	_, _ = c.Read(hdr[:]) // wait for the client to hang up
}
