package layout

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestNormalizeAddrs(t *testing.T) {
	in := []string{
		"node1", " node2:7000 ", "10.0.0.1", "10.0.0.1:7001",
		"[::1]:7412", "[::1]", "::2", "[2001:DB8:0:0::1]:80", "Node3", "fe80::1%eth0",
	}
	want := []string{
		"node1:7411", "node2:7000", "10.0.0.1:7411", "10.0.0.1:7001",
		"[::1]:7412", "[::1]:7411", "[::2]:7411", "[2001:db8::1]:80", "Node3:7411", "[fe80::1%eth0]:7411",
	}
	got, err := NormalizeAddrs(in, 7411)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("NormalizeAddrs = %q\nwant %q", got, want)
	}
	if in[1] != " node2:7000 " {
		t.Fatal("input modified")
	}
	// Normalised output normalises to itself.
	again, err := NormalizeAddrs(got, 1)
	if err != nil || !slices.Equal(again, got) {
		t.Fatalf("second pass: %v %q", err, again)
	}
	if got, err := NormalizeAddrs(nil, 7411); err != nil || len(got) != 0 {
		t.Fatalf("empty list: %q, %v", got, err)
	}
}

func TestNormalizeAddrsErrors(t *testing.T) {
	tests := []struct {
		in      []string
		port    int
		want    string
		wantErr error
	}{
		{[]string{"a"}, 0, "port 0 is out of range", ErrAddress},
		{[]string{"a"}, 65536, "port 65536 is out of range", ErrAddress},
		{[]string{"a", ""}, 7411, "node 1: invalid node address \"\": empty entry", ErrAddress},
		{[]string{"a:"}, 7411, "empty port", ErrAddress},
		{[]string{"a:0"}, 7411, "out of range 1..65535", ErrAddress},
		{[]string{"a:65536"}, 7411, "out of range 1..65535", ErrAddress},
		{[]string{"a:99999999999999999999"}, 7411, "out of range 1..65535", ErrAddress},
		{[]string{"a:-1"}, 7411, "not a number", ErrAddress},
		{[]string{":7411"}, 7411, "empty host", ErrAddress},
		{[]string{"a b"}, 7411, "invalid character ' '", ErrAddress},
		{[]string{"a/b"}, 7411, "invalid character '/'", ErrAddress},
		{[]string{"[::1"}, 7411, "missing ']'", ErrAddress},
		{[]string{"[::1]x"}, 7411, "unexpected text after ']'", ErrAddress},
		{[]string{"[node1]:7411"}, 7411, "must hold an IPv6 address", ErrAddress},
		{[]string{"[10.0.0.1]:7411"}, 7411, "must hold an IPv6 address", ErrAddress},
		{[]string{"::1:7411:x"}, 7411, "[addr]:port", ErrAddress},
		{[]string{"fe80::1%a]b"}, 7411, "[addr]:port", ErrAddress},
		{[]string{strings.Repeat("h", 256)}, 7411, "longer than 255", ErrAddress},
		{[]string{"a", "b", "a:7411"}, 7411, "node 2 a:7411 repeats node 0", ErrDuplicate},
		{[]string{"Node1", "node1"}, 7411, "node 1 node1:7411 repeats node 0", ErrDuplicate},
		{[]string{"[::1]:7411", "0:0::1"}, 7411, "repeats node 0", ErrDuplicate},
	}
	for _, tt := range tests {
		_, err := NormalizeAddrs(tt.in, tt.port)
		if err == nil {
			t.Errorf("NormalizeAddrs(%q, %d): no error, want %q", tt.in, tt.port, tt.want)
			continue
		}
		if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NormalizeAddrs(%q, %d) = %v, want %v containing %q", tt.in, tt.port, err, tt.wantErr, tt.want)
		}
	}
}

func TestParseHostfile(t *testing.T) {
	file := "# job hosts\n" +
		"node1\n" +
		"\n" +
		"   node2:7000   # second\n" +
		"\t[::1]:7500\r\n" +
		"10.0.0.3\n" +
		"node1:7001\n" + // same host, another port: a second daemon
		"# end"
	got, err := ParseHostfile(strings.NewReader(file), 7411)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"node1:7411", "node2:7000", "[::1]:7500", "10.0.0.3:7411", "node1:7001"}
	if !slices.Equal(got, want) {
		t.Fatalf("ParseHostfile = %q, want %q", got, want)
	}
	got, err = ParseHostfile(strings.NewReader("# nothing\n\n"), 7411)
	if err != nil || len(got) != 0 {
		t.Fatalf("comment-only file: %q, %v", got, err)
	}
}

func TestParseHostfileErrors(t *testing.T) {
	tests := []struct {
		file    string
		want    string
		wantErr error
	}{
		{"a\nb\n\na:7411\n", "hostfile line 4: duplicate node: a:7411 is already on line 1", ErrDuplicate},
		{"a\nb c\n", "hostfile line 2:", ErrAddress},
		{"a\nb:x\n", "hostfile line 2:", ErrAddress},
		{"a slots=4\n", "hostfile line 1:", ErrAddress},
		{"a\n" + strings.Repeat("x", 5000) + "\n", "hostfile line 2: bufio.Scanner: token too long", nil},
	}
	for _, tt := range tests {
		_, err := ParseHostfile(strings.NewReader(tt.file), 7411)
		if err == nil {
			t.Errorf("ParseHostfile(%q): no error, want %q", short(tt.file), tt.want)
			continue
		}
		if tt.wantErr != nil && !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseHostfile(%q) = %v, want %v containing %q", short(tt.file), err, tt.wantErr, tt.want)
		}
	}
	if _, err := ParseHostfile(strings.NewReader("a"), 0); !errors.Is(err, ErrAddress) {
		t.Errorf("default port 0: %v", err)
	}
	readErr := errors.New("disk on fire")
	if _, err := ParseHostfile(iotest.ErrReader(readErr), 7411); !errors.Is(err, readErr) {
		t.Errorf("read error: %v, want it wrapped", err)
	}
}

func FuzzParseHostfile(f *testing.F) {
	for _, s := range []string{
		"node1\nnode2:7000\n", "# c\n\n[::1]:7411\n", "a\na\n", "[::1\n", "a:0\n",
		"::1\n[::1]\n", "fe80::1%eth0\n", "a:65535 # x\r\n", "\x00\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseHostfile(strings.NewReader(s), 7411)
		if err != nil {
			return
		}
		// Normalised entries are distinct and are their own normal form.
		again, err := NormalizeAddrs(got, 1)
		if err != nil {
			t.Fatalf("normalised hostfile %q does not normalise: %v", got, err)
		}
		if !slices.Equal(again, got) {
			t.Fatalf("not idempotent: %q -> %q", got, again)
		}
	})
}
