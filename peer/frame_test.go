package peer

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, h := range []header{
		{typ: ftData, length: 0},
		{typ: ftRequest, length: 5, id: 1<<64 - 1},
		{typ: ftPing, id: 42},
	} {
		payload := bytes.Repeat([]byte{7}, int(h.length))
		var hdr [headerLen]byte
		putHeader(&hdr, h)
		in := append(hdr[:], payload...)
		got, p, err := readFrame(bytes.NewReader(in), &hdr, 100, nil)
		if err != nil || got != h || !bytes.Equal(p, payload) {
			t.Fatalf("round trip of %+v: %+v %v %v", h, got, p, err)
		}
	}
}

func TestReadFrameRejects(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, io.EOF},
		{"short header", []byte("Sf\x20"), io.ErrUnexpectedEOF},
		{"bad magic", rawFrame(byte(ftData), 0, nil)[:0:0], nil}, // replaced below
		{"unknown type", rawFrame(99, 0, nil), ErrBadFrame},
		{"type zero", rawFrame(0, 0, nil), ErrBadFrame},
		{"flags", func() []byte { b := rawFrame(byte(ftData), 0, nil); b[3] = 1; return b }(), ErrBadFrame},
		{"over limit", rawFrame(byte(ftData), 101, nil), ErrFrameTooLarge},
		{"4 GiB", rawFrame(byte(ftData), 0xFFFFFFFF, nil), ErrFrameTooLarge},
		{"truncated payload", rawFrame(byte(ftData), 10, []byte("abc")), io.ErrUnexpectedEOF},
	}
	cases[2].in = append([]byte("XX"), rawFrame(byte(ftData), 0, nil)[2:]...)
	cases[2].want = ErrBadFrame
	for _, tc := range cases {
		var hdr [headerLen]byte
		_, _, err := readFrame(bytes.NewReader(tc.in), &hdr, 100, nil)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// readFrame reuses the caller's buffer when the payload fits.
func TestReadFrameBuffer(t *testing.T) {
	var hdr [headerLen]byte
	buf := make([]byte, 0, 64)
	in := rawFrame(byte(ftData), 10, []byte("0123456789"))
	_, p, err := readFrame(bytes.NewReader(in), &hdr, 100, buf)
	if err != nil || &p[0] != &buf[:1][0] {
		t.Fatalf("payload not read into the buffer: %v", err)
	}
	_, p, err = readFrame(bytes.NewReader(in), &hdr, 100, buf[:0:5])
	if err != nil || len(p) != 10 || &p[0] == &buf[:1][0] {
		t.Fatalf("short buffer: %v", err)
	}
}

// A frame leaves in one write: header and payload together.
func TestWriteFrameOneWrite(t *testing.T) {
	a, b := tcpPair(t)
	fc := newFrameConn(a, time.Second)
	payload := bytes.Repeat([]byte("x"), 1000)
	n, err := fc.writeFrame(ftData, 9, payload[:400], payload[400:])
	if err != nil || n != headerLen+1000 {
		t.Fatalf("write: %d, %v", n, err)
	}
	var hdr [headerLen]byte
	h, p, err := readFrame(bufio.NewReader(b), &hdr, 2000, nil)
	if err != nil || h.id != 9 || !bytes.Equal(p, payload) {
		t.Fatalf("read back: %+v %v", h, err)
	}
}

func tcpPair(t testing.TB) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// FuzzReadFrame feeds arbitrary bytes to the frame decoder: it must never
// panic, never return a payload over the limit, and whatever it accepts
// must re-encode to the bytes it consumed.
func FuzzReadFrame(f *testing.F) {
	f.Add(rawFrame(byte(ftData), 3, []byte("abc")))
	f.Add(rawFrame(byte(ftHello), 0xFFFFFFFF, nil))
	f.Add(rawFrame(byte(ftRequest), 5, []byte{3, 'a', 'b', 'c', 'd'}))
	f.Add(rawFrame(200, 0, nil))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(rawFrame(byte(ftPing), 0, nil)[:9])
	f.Add([]byte{})
	const limit = 1 << 12
	f.Fuzz(func(t *testing.T, in []byte) {
		var hdr [headerLen]byte
		r := bytes.NewReader(in)
		h, p, err := readFrame(r, &hdr, limit, make([]byte, 0, 16))
		if err != nil {
			if p != nil {
				t.Fatalf("payload %d bytes returned with error %v", len(p), err)
			}
			return
		}
		if len(p) > limit || len(p) != int(h.length) || !h.typ.known() {
			t.Fatalf("accepted %+v with %d-byte payload", h, len(p))
		}
		var out [headerLen]byte
		putHeader(&out, h)
		consumed := len(in) - r.Len()
		if !bytes.Equal(append(out[:], p...), in[:consumed]) {
			t.Fatalf("re-encoding differs from the input")
		}
	})
}
