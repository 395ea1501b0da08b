package peer

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func sampleHello() hello {
	h := hello{version: protocolVersion, purpose: purposeStream, from: 3, to: 7,
		job: "job-42", addr: "127.0.0.4:7411", stream: "xor/ckpt.100/2"}
	for i := range h.nonce {
		h.nonce[i] = byte(i)
	}
	return h
}

func TestHelloRoundTrip(t *testing.T) {
	for _, h := range []hello{
		sampleHello(),
		{version: protocolVersion, purpose: purposeLink, job: "j"},
		{version: protocolVersion, purpose: purposeLink, job: strings.Repeat("j", 255), addr: strings.Repeat("a", 255), from: maxNodes - 1},
	} {
		b := appendHello(nil, &h)
		got, err := parseHello(b)
		if err != nil || got != h {
			t.Fatalf("round trip: %+v, %v; want %+v", got, err, h)
		}
	}
}

func TestParseHelloRejects(t *testing.T) {
	good := sampleHello()
	mod := func(f func(h *hello)) []byte {
		h := good
		f(&h)
		return appendHello(nil, &h)
	}
	b := appendHello(nil, &good)
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrBadHello},
		{"bad magic", append([]byte("HELLO"), b[5:]...), ErrBadHello},
		{"version", mod(func(h *hello) { h.version = 9 }), ErrVersion},
		{"truncated", b[:len(b)-1], ErrBadHello},
		{"trailing", append(b, 0), ErrBadHello},
		{"purpose", mod(func(h *hello) { h.purpose = 9 }), ErrBadHello},
		{"node range", mod(func(h *hello) { h.from = maxNodes }), ErrBadHello},
		{"empty job", mod(func(h *hello) { h.job = "" }), ErrBadHello},
		{"stream id on a link", mod(func(h *hello) { h.purpose = purposeLink }), ErrBadHello},
		{"stream without id", mod(func(h *hello) { h.stream = "" }), ErrBadHello},
		{"length past end", func() []byte { c := bytes.Clone(b); c[len(helloMagic)+2+1+8] = 250; return c }(), ErrBadHello},
	}
	for _, tc := range cases {
		if _, err := parseHello(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// The MACs bind every hello field and the role.
func TestTranscriptMAC(t *testing.T) {
	h := sampleHello()
	b := appendHello(nil, &h)
	nonceS := bytes.Repeat([]byte{1}, nonceLen)
	base := transcriptMAC(testSecret, roleServer, b, nonceS)
	if bytes.Equal(base, transcriptMAC(testSecret, roleClient, b, nonceS)) {
		t.Fatal("server and client MACs are equal: reflection possible")
	}
	if bytes.Equal(base, transcriptMAC([]byte("another secret of 16+"), roleServer, b, nonceS)) {
		t.Fatal("MAC does not depend on the secret")
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 1
		if bytes.Equal(base, transcriptMAC(testSecret, roleServer, c, nonceS)) {
			t.Fatalf("flipping hello byte %d leaves the MAC unchanged", i)
		}
	}
	if bytes.Equal(base, transcriptMAC(testSecret, roleServer, b, make([]byte, nonceLen))) {
		t.Fatal("MAC does not depend on the server nonce")
	}
}

// FuzzHello feeds arbitrary bytes to the hello decoder: no panic, and what
// it accepts is canonical (re-encodes to the same bytes).
func FuzzHello(f *testing.F) {
	h := sampleHello()
	f.Add(appendHello(nil, &h))
	l := hello{version: protocolVersion, purpose: purposeLink, job: "j", addr: "[::1]:1"}
	f.Add(appendHello(nil, &l))
	f.Add([]byte("SCRFS\x00\x02"))
	f.Add([]byte("SCRFS"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := parseHello(in)
		if err != nil {
			if errors.Is(err, ErrVersion) && h.version == protocolVersion {
				t.Fatalf("version error for our own version")
			}
			return
		}
		if out := appendHello(nil, &h); !bytes.Equal(out, in) {
			t.Fatalf("accepted hello is not canonical:\n in %x\nout %x", in, out)
		}
	})
}
