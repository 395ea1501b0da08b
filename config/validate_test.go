package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// problems splits a joined error into its *Error parts.
func problems(t *testing.T, err error) []*Error {
	t.Helper()
	if err == nil {
		return nil
	}
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok && !isConfigError(err) {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]*Error, 0, len(list))
	for _, e := range list {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("error %q is not a *config.Error", e)
		}
		out = append(out, ce)
	}
	return out
}

func isConfigError(err error) bool {
	_, ok := err.(*Error)
	return ok
}

// keysOf returns the keys named by the problems in err.
func keysOf(t *testing.T, err error) []string {
	t.Helper()
	var keys []string
	for _, p := range problems(t, err) {
		keys = append(keys, p.Key)
	}
	return keys
}

func sec(s string) Duration { d, _ := time.ParseDuration(s); return Duration{d} }

func TestValidateEveryKey(t *testing.T) {
	type row struct {
		key string
		set func(c *Config)
		ok  bool
	}
	rows := []row{
		{"job.id", func(c *Config) { c.Job.ID = "" }, true},
		{"job.id", func(c *Config) { c.Job.ID = "12345_7" }, true},
		{"job.id", func(c *Config) { c.Job.ID = "A.b-c_9" }, true},
		{"job.id", func(c *Config) { c.Job.ID = strings.Repeat("x", 64) }, true},
		{"job.id", func(c *Config) { c.Job.ID = strings.Repeat("x", 65) }, false},
		{"job.id", func(c *Config) { c.Job.ID = "a/b" }, false},
		{"job.id", func(c *Config) { c.Job.ID = "a b" }, false},
		{"job.id", func(c *Config) { c.Job.ID = "é" }, false},
		{"job.secret_file", func(c *Config) { c.Job.SecretFile = "/run/secret" }, true},
		{"job.secret_file", func(c *Config) { c.Job.SecretFile = "rel/secret" }, false},
		{"job.secret", func(c *Config) { c.Job.Secret = "" }, true},
		{"job.secret", func(c *Config) { c.Job.Secret = "0123456789abcdef" }, true},
		{"job.secret", func(c *Config) { c.Job.Secret = "0123456789abcde" }, false},
		{"paths.cache_base", func(c *Config) { c.Paths.CacheBase = "/tmp/cache" }, true},
		{"paths.cache_base", func(c *Config) { c.Paths.CacheBase = "" }, false},
		{"paths.cache_base", func(c *Config) { c.Paths.CacheBase = "cache" }, false},
		{"paths.control_base", func(c *Config) { c.Paths.ControlBase = "/tmp/ctl" }, true},
		{"paths.control_base", func(c *Config) { c.Paths.ControlBase = "" }, false},
		{"paths.control_base", func(c *Config) { c.Paths.ControlBase = "./ctl" }, false},
		{"paths.prefix", func(c *Config) { c.Paths.Prefix = "" }, true},
		{"paths.prefix", func(c *Config) { c.Paths.Prefix = "/lustre/me" }, true},
		{"paths.prefix", func(c *Config) { c.Paths.Prefix = "lustre/me" }, false},
		{"paths.prefix", func(c *Config) { c.Paths.Prefix = "s3://ckpts/run1" }, true},
		{"paths.prefix", func(c *Config) { c.Paths.Prefix = "s3://ckpts" }, true},
		{"paths.prefix", func(c *Config) { c.Paths.Prefix = "s3://Ckpts/run1" }, false},
		{"paths.prefix", func(c *Config) { c.Paths.Prefix = "s3://ckpts/a//b" }, false},
		{"paths.prefix", func(c *Config) { c.Paths.Prefix = "s3://ckpts/../b" }, false},
		{"datasets.match", func(c *Config) { c.Datasets.Match = `^ckpt/step_(?P<dataset>\d+)_rank_\d+\.bin$` }, true},
		{"datasets.match", func(c *Config) { c.Datasets.Match = `^ckpt_(\d+)` }, false},
		{"datasets.match", func(c *Config) { c.Datasets.Match = `^(?P<dataset>[` }, false},
		{"datasets.match", func(c *Config) { c.Datasets.Match = "" }, false},
		{"datasets.complete", func(c *Config) { c.Datasets.Complete = nil }, true},
		{"datasets.complete", func(c *Config) { c.Datasets.Complete = []string{"idle:5m", "rename"} }, true},
		{"datasets.complete", func(c *Config) { c.Datasets.Complete = []string{"marker:"} }, false},
		{"datasets.complete", func(c *Config) { c.Datasets.Complete = []string{"next", "next"} }, false},
		{"datasets.cache_size", func(c *Config) { c.Datasets.CacheSize = 1 }, true},
		{"datasets.cache_size", func(c *Config) { c.Datasets.CacheSize = 0 }, false},
		{"datasets.cache_size", func(c *Config) { c.Datasets.CacheSize = -3 }, false},
		{"fuse.mount", func(c *Config) { c.Fuse.Mount = "direct" }, true},
		{"fuse.mount", func(c *Config) { c.Fuse.Mount = "fusermount" }, true},
		{"fuse.mount", func(c *Config) { c.Fuse.Mount = "fusermount3" }, false},
		{"fuse.passthrough", func(c *Config) { c.Fuse.Passthrough = "on" }, true},
		{"fuse.passthrough", func(c *Config) { c.Fuse.Passthrough = "off" }, true},
		{"fuse.passthrough", func(c *Config) { c.Fuse.Passthrough = "yes" }, false},
		{"fuse.passthrough", func(c *Config) { c.Fuse.Passthrough = "" }, false},
		{"fuse.max_write", func(c *Config) { c.Fuse.MaxWrite = 4 * KiB }, true},
		{"fuse.max_write", func(c *Config) { c.Fuse.MaxWrite = 128 * KiB }, true},
		{"fuse.max_write", func(c *Config) { c.Fuse.MaxWrite = 0 }, false},
		{"fuse.max_write", func(c *Config) { c.Fuse.MaxWrite = 6000 }, false},
		{"fuse.max_write", func(c *Config) { c.Fuse.MaxWrite = 2 * MiB }, false},
		{"fuse.entry_timeout", func(c *Config) { c.Fuse.EntryTimeout = sec("0s") }, true},
		{"fuse.entry_timeout", func(c *Config) { c.Fuse.EntryTimeout = sec("-1s") }, false},
		{"fuse.attr_timeout", func(c *Config) { c.Fuse.AttrTimeout = sec("1s") }, true},
		{"fuse.attr_timeout", func(c *Config) { c.Fuse.AttrTimeout = sec("-1ns") }, false},
		{"fuse.negative_timeout", func(c *Config) { c.Fuse.NegativeTimeout = sec("0s") }, true},
		{"fuse.negative_timeout", func(c *Config) { c.Fuse.NegativeTimeout = sec("-5m") }, false},
		{"fuse.allow_other", func(c *Config) { c.Fuse.AllowOther = true }, true},
		{"fuse.debug", func(c *Config) { c.Fuse.Debug = true }, true},
		{"fuse.trust_mountpoint", func(c *Config) { c.Fuse.TrustMountpoint = true }, true},
		{"metrics.listen", func(c *Config) { c.Metrics.Listen = "" }, true},
		{"metrics.listen", func(c *Config) { c.Metrics.Listen = ":9464" }, true},
		{"metrics.listen", func(c *Config) { c.Metrics.Listen = "[::1]:9464" }, true},
		{"metrics.listen", func(c *Config) { c.Metrics.Listen = "localhost" }, false},
		{"metrics.listen", func(c *Config) { c.Metrics.Listen = "localhost:http" }, false},
		{"metrics.listen", func(c *Config) { c.Metrics.Listen = "localhost:70000" }, false},
		{"metrics.pprof", func(c *Config) { c.Metrics.Pprof = true }, true},
		{"control.allow_root", func(c *Config) { c.Control.AllowRoot = true }, true},
		{"metrics.pprof", func(c *Config) { c.Metrics.Pprof = true; c.Metrics.Listen = "[::1]:0" }, true},
		{"metrics.pprof", func(c *Config) { c.Metrics.Pprof = true; c.Metrics.Listen = "localhost:9464" }, true},
		{"metrics.pprof", func(c *Config) { c.Metrics.Pprof = true; c.Metrics.Listen = ":9464" }, false},
		{"metrics.pprof", func(c *Config) { c.Metrics.Pprof = true; c.Metrics.Listen = "10.1.2.3:9464" }, false},
		{"metrics.pprof", func(c *Config) { c.Metrics.Pprof = true; c.Metrics.Listen = "" }, false},
		{"log.level", func(c *Config) { c.Log.Level = "debug" }, true},
		{"log.level", func(c *Config) { c.Log.Level = "error" }, true},
		{"log.level", func(c *Config) { c.Log.Level = "trace" }, false},
		{"log.level", func(c *Config) { c.Log.Level = "INFO" }, false},
		{"log.format", func(c *Config) { c.Log.Format = "json" }, true},
		{"log.format", func(c *Config) { c.Log.Format = "xml" }, false},
		{"cluster.nodes", func(c *Config) { c.Cluster.Nodes = []string{"n1", "n2:7000", "10.0.0.3", "[::1]:7411"} }, true},
		{"cluster.nodes", func(c *Config) { c.Cluster.Nodes = []string{"::1"} }, true}, // gets [::1]:7411
		{"cluster.nodes", func(c *Config) { c.Cluster.Nodes = []string{"n1", ""} }, false},
		{"cluster.nodes", func(c *Config) { c.Cluster.Nodes = []string{"n1:"} }, false},
		{"cluster.nodes", func(c *Config) { c.Cluster.Nodes = []string{":7411"} }, false},
		{"cluster.nodes", func(c *Config) { c.Cluster.Nodes = []string{"n1:0"} }, false},
		{"cluster.nodes", func(c *Config) { c.Cluster.Nodes = []string{"n1:x"} }, false},
		{"cluster.nodes", func(c *Config) { c.Cluster.Nodes = []string{"n 1"} }, false},
		{"cluster.nodes", func(c *Config) { c.Cluster.Nodes = []string{"n1", "n1:7411"} }, false}, // same node twice
		{"cluster.hostfile", func(c *Config) { c.Cluster.Hostfile = "/etc/hosts.job" }, true},
		{"cluster.hostfile", func(c *Config) { c.Cluster.Hostfile = "hosts" }, false},
		{"cluster.hostfile", func(c *Config) { c.Cluster.Hostfile = "/h"; c.Cluster.Nodes = []string{"a"} }, false},
		{"cluster.node_index", func(c *Config) { c.Cluster.NodeIndex = 5 }, true},
		{"cluster.node_index", func(c *Config) { c.Cluster.NodeIndex = 1; c.Cluster.Nodes = []string{"a", "b"} }, true},
		{"cluster.node_index", func(c *Config) { c.Cluster.NodeIndex = 2; c.Cluster.Nodes = []string{"a", "b"} }, false},
		{"cluster.node_index", func(c *Config) { c.Cluster.NodeIndex = -2 }, false},
		{"cluster.port", func(c *Config) { c.Cluster.Port = 1 }, true},
		{"cluster.port", func(c *Config) { c.Cluster.Port = 65535 }, true},
		{"cluster.port", func(c *Config) { c.Cluster.Port = 0 }, false},
		{"cluster.port", func(c *Config) { c.Cluster.Port = 65536 }, false},
		{"cluster.listen", func(c *Config) { c.Cluster.Listen = "0.0.0.0:7411" }, true},
		{"cluster.listen", func(c *Config) { c.Cluster.Listen = "0.0.0.0" }, false},
		{"cluster.listen", func(c *Config) { c.Cluster.Listen = "0.0.0.0:0" }, false},
		{"cluster.failure_domains", func(c *Config) { c.Cluster.FailureDomains = []string{"rack1/enc2", "rack1/enc3"} }, true},
		{"cluster.failure_domains", func(c *Config) {
			c.Cluster.Nodes = []string{"a", "b"}
			c.Cluster.FailureDomains = []string{"r1", "r2"}
		}, true},
		{"cluster.failure_domains", func(c *Config) { c.Cluster.FailureDomains = []string{""} }, false},
		{"cluster.failure_domains", func(c *Config) { c.Cluster.FailureDomains = []string{"rack1//enc2"} }, false},
		{"cluster.failure_domains", func(c *Config) { c.Cluster.FailureDomains = []string{"/rack1"} }, false},
		{"cluster.failure_domains", func(c *Config) { c.Cluster.FailureDomains = []string{"rack1/"} }, false},
		{"cluster.failure_domains", func(c *Config) {
			c.Cluster.Nodes = []string{"a", "b"}
			c.Cluster.FailureDomains = []string{"r1"}
		}, false},
		{"cluster.connect_timeout", func(c *Config) { c.Cluster.ConnectTimeout = sec("1s") }, true},
		{"cluster.connect_timeout", func(c *Config) { c.Cluster.ConnectTimeout = sec("0s") }, false},
		{"cluster.io_timeout", func(c *Config) { c.Cluster.IOTimeout = sec("3s") }, true},
		{"cluster.io_timeout", func(c *Config) { c.Cluster.IOTimeout = sec("-3s") }, false},
		{"cluster.heartbeat", func(c *Config) { c.Cluster.Heartbeat = sec("29s") }, true},
		{"cluster.heartbeat", func(c *Config) { c.Cluster.Heartbeat = sec("30s") }, false}, // not < io_timeout
		{"cluster.heartbeat", func(c *Config) { c.Cluster.Heartbeat = sec("0s") }, false},
		{"redundancy.scheme", func(c *Config) { c.Redundancy.Scheme = "xor" }, true},
		{"redundancy.scheme", func(c *Config) { c.Redundancy.Scheme = "single" }, true},
		{"redundancy.scheme", func(c *Config) { c.Redundancy.Scheme = "partner" }, true},
		{"redundancy.scheme", func(c *Config) { c.Redundancy.Scheme = "rs" }, true},
		{"redundancy.scheme", func(c *Config) { c.Redundancy.Scheme = "XOR" }, false},
		{"redundancy.scheme", func(c *Config) { c.Redundancy.Scheme = "raid5" }, false},
		{"redundancy.set_size", func(c *Config) { c.Redundancy.SetSize = 2 }, true},
		{"redundancy.set_size", func(c *Config) { c.Redundancy.SetSize = 1 }, false},
		{"redundancy.set_size", func(c *Config) { c.Redundancy.Scheme = "rs"; c.Redundancy.SetSize = 250; c.Redundancy.Parity = 7 }, false},
		{"redundancy.replicas", func(c *Config) { c.Redundancy.Replicas = 3 }, true},
		{"redundancy.replicas", func(c *Config) { c.Redundancy.Replicas = 0 }, false},
		{"redundancy.replicas", func(c *Config) { c.Redundancy.Scheme = "partner"; c.Redundancy.Replicas = 8 }, false},
		{"redundancy.parity", func(c *Config) { c.Redundancy.Parity = 255 }, true}, // not rs: not tied to set_size
		{"redundancy.parity", func(c *Config) { c.Redundancy.Scheme = "rs"; c.Redundancy.Parity = 7 }, true},
		{"redundancy.parity", func(c *Config) { c.Redundancy.Parity = 0 }, false},
		{"redundancy.parity", func(c *Config) { c.Redundancy.Parity = 256 }, false},
		{"redundancy.parity", func(c *Config) { c.Redundancy.Scheme = "rs"; c.Redundancy.Parity = 8 }, false},
		{"redundancy.timeout", func(c *Config) { c.Redundancy.Timeout = sec("1ms") }, true},
		{"redundancy.timeout", func(c *Config) { c.Redundancy.Timeout = sec("0s") }, false},
		{"redundancy.piece_size", func(c *Config) { c.Redundancy.PieceSize = 4 * KiB }, true},
		{"redundancy.piece_size", func(c *Config) { c.Redundancy.PieceSize = 64 * MiB }, true},
		{"redundancy.piece_size", func(c *Config) { c.Redundancy.PieceSize = 4095 }, false},
		{"redundancy.piece_size", func(c *Config) { c.Redundancy.PieceSize = 64*MiB + 1 }, false},
		{"flush.every", func(c *Config) { c.Flush.Every = 0 }, true},
		{"flush.every", func(c *Config) { c.Flush.Every = -1 }, false},
		{"flush.async", func(c *Config) { c.Flush.Async = false }, true},
		{"flush.bandwidth", func(c *Config) { c.Flush.Bandwidth = 100 * MiB }, true},
		{"flush.bandwidth", func(c *Config) { c.Flush.Bandwidth = -1 }, false},
		{"flush.streams", func(c *Config) { c.Flush.Streams = 1 }, true},
		{"flush.streams", func(c *Config) { c.Flush.Streams = 64 }, true},
		{"flush.streams", func(c *Config) { c.Flush.Streams = 0 }, false},
		{"flush.streams", func(c *Config) { c.Flush.Streams = 65 }, false},
		{"flush.crc", func(c *Config) { c.Flush.CRC = false }, true},
		{"fetch.enabled", func(c *Config) { c.Fetch.Enabled = false }, true},
		{"restart.from_cache", func(c *Config) { c.Restart.FromCache = false }, true},
		{"restart.member_timeout", func(c *Config) { c.Restart.MemberTimeout = sec("1s") }, true},
		{"restart.member_timeout", func(c *Config) { c.Restart.MemberTimeout = sec("0s") }, false},
		{"namespace.read_cache", func(c *Config) { c.Namespace.ReadCache = "8GiB" }, true},
		{"namespace.read_cache", func(c *Config) { c.Namespace.ReadCache = "100%" }, true},
		{"namespace.read_cache", func(c *Config) { c.Namespace.ReadCache = "150%" }, false},
		{"namespace.read_cache", func(c *Config) { c.Namespace.ReadCache = "0" }, false},
		{"namespace.read_cache", func(c *Config) { c.Namespace.ReadCache = "lots" }, false},
		{"namespace.fetch_whole", func(c *Config) { c.Namespace.FetchWhole = 0 }, true},
		{"namespace.fetch_whole", func(c *Config) { c.Namespace.FetchWhole = 4 * GiB }, true},
		{"namespace.fetch_whole", func(c *Config) { c.Namespace.FetchWhole = -1 }, false},
		{"prefix.key_file", func(c *Config) { c.Prefix.KeyFile = "/home/me/team.key" }, true},
		{"prefix.key_file", func(c *Config) { c.Prefix.KeyFile = "team.key" }, false},
		{"prefix.trust_unsigned", func(c *Config) { c.Prefix.TrustUnsigned = true }, true},
	}
	covered := map[string]bool{}
	for _, r := range rows {
		covered[r.key] = true
		c := Default()
		r.set(c)
		err := c.Validate()
		if r.ok {
			if err != nil {
				t.Errorf("%s: want valid, got %v", r.key, err)
			}
			continue
		}
		keys := keysOf(t, err)
		if len(keys) != 1 || keys[0] != r.key {
			t.Errorf("%s: want one error naming it, got keys %q: %v", r.key, keys, err)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error does not wrap ErrInvalid: %v", r.key, err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "config: "+r.key+" = ") {
			t.Errorf("%s: message %q does not start with the key and value", r.key, msg)
		}
	}
	for _, f := range newSchema().fields {
		if !covered[f.key()] {
			t.Errorf("no validation row for %s", f.key())
		}
	}
}

func TestValidateReportsAll(t *testing.T) {
	c := Default()
	c.Datasets.CacheSize = 0
	c.Log.Level = "loud"
	c.Flush.Streams = 0
	got := keysOf(t, c.Validate())
	want := []string{"datasets.cache_size", "log.level", "flush.streams"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("keys = %q, want %q", got, want)
	}
}

func TestValidateMessages(t *testing.T) {
	c := Default()
	c.Datasets.CacheSize = 0
	want := "config: datasets.cache_size = 0: must be at least 1 (SCR_CACHE_SIZE: completed checkpoints kept in cache)"
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	c = Default()
	c.Datasets.Match = `^ckpt_(\d+)`
	want = `config: datasets.match = "^ckpt_(\d+)": has no named group (?P<dataset>...)`
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got  %v\nwant prefix %s", err, want)
	}
	// The secret never appears in a message.
	c = Default()
	c.Job.Secret = "hunter2"
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "<redacted>") {
		t.Errorf("secret error = %v", err)
	}
}

func TestHelpers(t *testing.T) {
	c := Default()
	for _, tc := range []struct {
		scheme string
		nodes  int
		want   string
	}{
		{"auto", 1, "single"}, {"auto", 2, "xor"}, {"auto", 64, "xor"}, {"rs", 1, "rs"}, {"partner", 4, "partner"},
	} {
		c.Redundancy.Scheme = tc.scheme
		if got := c.EffectiveScheme(tc.nodes); got != tc.want {
			t.Errorf("EffectiveScheme(%s, %d) = %s, want %s", tc.scheme, tc.nodes, got, tc.want)
		}
	}
	for lvl, want := range map[string]string{"debug": "DEBUG", "info": "INFO", "warn": "WARN", "error": "ERROR"} {
		c.Log.Level = lvl
		if got := c.LogLevel().String(); got != want {
			t.Errorf("LogLevel(%s) = %s", lvl, got)
		}
	}
}
