package peer

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

func TestConfigValidate(t *testing.T) {
	good := func() Config {
		return Config{Job: "j", Self: 1, Addrs: []string{"127.0.0.1:1", "127.0.0.2:1", ""}, Secret: testSecret}
	}
	if c := good(); c.Validate() != nil {
		t.Fatalf("good config: %v", c.Validate())
	}
	cases := []struct {
		name string
		mod  func(c *Config)
		want string // the field the error must name
	}{
		{"no job", func(c *Config) { c.Job = "" }, "Job"},
		{"long job", func(c *Config) { c.Job = strings.Repeat("j", 256) }, "Job"},
		{"no addrs", func(c *Config) { c.Addrs = nil }, "Addrs"},
		{"self range", func(c *Config) { c.Self = 3 }, "Self"},
		{"self negative", func(c *Config) { c.Self = -1 }, "Self"},
		{"short secret", func(c *Config) { c.Secret = []byte("short") }, "Secret"},
		{"bad addr", func(c *Config) { c.Addrs[0] = "nohostport" }, "Addrs[0]"},
		{"own addr empty", func(c *Config) { c.Addrs[1] = "" }, "Addrs[1]"},
		{"bad listen", func(c *Config) { c.Listen = "x" }, "Listen"},
		{"negative timeout", func(c *Config) { c.IOTimeout = -1 }, "IOTimeout"},
		{"tiny frame", func(c *Config) { c.MaxFrame = 10 }, "MaxFrame"},
	}
	for _, tc := range cases {
		c := good()
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
		if _, err := Start(context.Background(), c); err == nil {
			t.Errorf("%s: Start accepted an invalid config", tc.name)
		}
	}
}

// Start copies the caller's slices, and a port of 0 is replaced by the bound
// one in the advertised address.
func TestStartCopiesConfig(t *testing.T) {
	checkLeaks(t)
	cfg := testConfig(0, 2)
	cfg.Secret = bytes.Clone(testSecret)
	n := startNode(t, cfg)
	cfg.Addrs[1] = "10.0.0.1:1"
	cfg.Secret[0] ^= 0xFF
	addrs := n.Addrs()
	if addrs[1] != "" || addrs[0] != n.Addr().String() || strings.HasSuffix(addrs[0], ":0") {
		t.Fatalf("address table %q (listening on %s)", addrs, n.Addr())
	}
	if n.cfg.Secret[0] == cfg.Secret[0] {
		t.Fatal("secret not copied")
	}
	// A second Node on the same registry is refused, not a panic.
	cfg2 := testConfig(1, 2)
	cfg2.Registerer = n.reg
	if _, err := Start(context.Background(), cfg2); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("second node on one registry: %v", err)
	}
	// Once the first is closed its metrics are unregistered and the
	// registry can be reused.
	_ = n.Close()
	n2, err := Start(context.Background(), cfg2)
	if err != nil {
		t.Fatal(err)
	}
	_ = n2.Close()
}

// Start's ctx ends the Node like Close.
func TestStartCtxShutsDown(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := testConfig(0, 2)
	n, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	testutil.Eventually(t, 10*time.Second, "the node closed by its context", n.isClosed)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestAdvertised(t *testing.T) {
	bound := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 7411}
	wild := &net.TCPAddr{IP: net.IPv4zero, Port: 7411}
	cases := []struct {
		cfg   string
		bound net.Addr
		want  string
	}{
		{"node5:7411", bound, "node5:7411"},
		{"node5:0", bound, "node5:7411"},
		{"", bound, "10.1.2.3:7411"},
		{"", wild, ""},
		{"0.0.0.0:0", wild, ""},
		{"[::]:7411", wild, ""},
		{"10.9.9.9:1", wild, "10.9.9.9:1"},
	}
	for _, tc := range cases {
		if got := advertised(tc.cfg, tc.bound); got != tc.want {
			t.Errorf("advertised(%q, %v) = %q, want %q", tc.cfg, tc.bound, got, tc.want)
		}
	}
}
