package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEnvValues(t *testing.T) {
	for _, tc := range []struct {
		env  string
		get  func(c *Config) any
		want any
	}{
		{"SCRFS_DATASETS_CACHE_SIZE=3", func(c *Config) any { return c.Datasets.CacheSize }, 3},
		{"SCRFS_DATASETS_CACHE_SIZE= 3 ", func(c *Config) any { return c.Datasets.CacheSize }, 3},
		{"SCRFS_PATHS_PREFIX=/lustre/me/run1", func(c *Config) any { return c.Paths.Prefix }, "/lustre/me/run1"},
		{"SCRFS_PATHS_PREFIX=", func(c *Config) any { return c.Paths.Prefix }, ""},
		{"SCRFS_CLUSTER_NODE_INDEX=2", func(c *Config) any { return c.Cluster.NodeIndex }, 2},
		{"SCRFS_JOB_SECRET=0123456789abcdef0", func(c *Config) any { return c.Job.Secret }, "0123456789abcdef0"},
		{"SCRFS_JOB_ID=run=7", func(c *Config) any { return c.Job.ID }, "run=7"}, // '=' in the value is kept
		{"SCRFS_FLUSH_ASYNC=false", func(c *Config) any { return c.Flush.Async }, false},
		{"SCRFS_FLUSH_ASYNC=0", func(c *Config) any { return c.Flush.Async }, false},
		{"SCRFS_FLUSH_ASYNC=no", func(c *Config) any { return c.Flush.Async }, false},
		{"SCRFS_FLUSH_ASYNC=NO", func(c *Config) any { return c.Flush.Async }, false},
		{"SCRFS_FUSE_DEBUG=true", func(c *Config) any { return c.Fuse.Debug }, true},
		{"SCRFS_FUSE_DEBUG=1", func(c *Config) any { return c.Fuse.Debug }, true},
		{"SCRFS_FUSE_DEBUG=Yes", func(c *Config) any { return c.Fuse.Debug }, true},
		{"SCRFS_FLUSH_BANDWIDTH=200MB", func(c *Config) any { return c.Flush.Bandwidth }, Size(200_000_000)},
		{"SCRFS_FUSE_MAX_WRITE=131072", func(c *Config) any { return c.Fuse.MaxWrite }, 128 * KiB},
		{"SCRFS_CLUSTER_HEARTBEAT=500ms", func(c *Config) any { return c.Cluster.Heartbeat.Duration }, 500 * time.Millisecond},
		{"SCRFS_CLUSTER_NODES=a, b:7000 ,c", func(c *Config) any { return c.Cluster.Nodes }, []string{"a", "b:7000", "c"}},
		{"SCRFS_CLUSTER_NODES=", func(c *Config) any { return c.Cluster.Nodes }, []string{}},
		{"SCRFS_DATASETS_COMPLETE=", func(c *Config) any { return c.Datasets.Complete }, []string{}},
		{"SCRFS_DATASETS_COMPLETE=rename", func(c *Config) any { return c.Datasets.Complete }, []string{"rename"}},
		{"SCRFS_DATASETS_MATCH=^(?P<dataset>run_\\d+)/", func(c *Config) any { return c.Datasets.Match }, `^(?P<dataset>run_\d+)/`},
	} {
		c := Default()
		if errs := applyEnv(c, []string{tc.env}, nil); len(errs) > 0 {
			t.Errorf("%s: %v", tc.env, errs[0])
			continue
		}
		if got := tc.get(c); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.env, got, tc.want)
		}
	}
}

func TestEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		env, want string
	}{
		{"SCRFS_FLUSH_EVERY=ten", `config: environment SCRFS_FLUSH_EVERY="ten": not an integer`},
		{"SCRFS_FLUSH_EVERY=", `config: environment SCRFS_FLUSH_EVERY="": not an integer`},
		{"SCRFS_FLUSH_ASYNC=maybe", `config: environment SCRFS_FLUSH_ASYNC="maybe": not a boolean (true/false, 1/0, yes/no)`},
		{"SCRFS_FLUSH_BANDWIDTH=fast", `config: environment SCRFS_FLUSH_BANDWIDTH="fast": invalid size "fast": want bytes`},
		{"SCRFS_CLUSTER_IO_TIMEOUT=30", `config: environment SCRFS_CLUSTER_IO_TIMEOUT="30": invalid duration "30": want a duration string`},
		{"SCRFS_DATASETS_CACHE_SISE=3", `config: environment SCRFS_DATASETS_CACHE_SISE: unknown key "datasets.cache_sise" (did you mean SCRFS_DATASETS_CACHE_SIZE?)`},
		{"SCRFS_FLUSH_ENABLED=0", `config: environment SCRFS_FLUSH_ENABLED: unknown key "flush.enabled" (did you mean SCRFS_FETCH_ENABLED?)`},
		{"SCRFS_LOG_X=1", `config: environment SCRFS_LOG_X: unknown key "log.x"`},
	} {
		errs := applyEnv(Default(), []string{tc.env}, nil)
		if len(errs) != 1 {
			t.Errorf("%s: got %d errors %v, want 1", tc.env, len(errs), errs)
			continue
		}
		if got := errs[0].Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s:\n got  %s\n want %s", tc.env, got, tc.want)
		}
		wantKind := ErrInvalid
		if strings.Contains(tc.want, "unknown key") {
			wantKind = ErrUnknownKey
		}
		if !errors.Is(errs[0], wantKind) {
			t.Errorf("%s: error does not wrap %v", tc.env, wantKind)
		}
	}
}

func TestEnvIgnoresOthers(t *testing.T) {
	env := []string{
		"SCRFS_CONTROL=/tmp/sock", // not a section: someone else's
		"SCRFS_FETCH=0",           // no key part: SCR habit, not ours
		"SCRFS_datasets_cache_size=9",
		"scrfs_datasets_cache_size=9",
		"HOME=/root",
		"SCRFS_NOEQUALS",
		"=weird",
	}
	c := Default()
	if errs := applyEnv(c, env, nil); len(errs) > 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("ignored variables changed the config")
	}
}

func TestEnvLastWins(t *testing.T) {
	c := Default()
	origins := map[string]origin{}
	env := []string{"SCRFS_DATASETS_CACHE_SIZE=3", "SCRFS_FLUSH_EVERY=ten", "SCRFS_DATASETS_CACHE_SIZE=5"}
	errs := applyEnv(c, env, origins)
	if c.Datasets.CacheSize != 5 {
		t.Errorf("cache_size = %d, want 5 (last entry)", c.Datasets.CacheSize)
	}
	if len(errs) != 1 || errs[0].Env != "SCRFS_FLUSH_EVERY" {
		t.Errorf("errors = %v", errs)
	}
	if o := origins["datasets.cache_size"]; o.env != "SCRFS_DATASETS_CACHE_SIZE" || o.envValue != "5" {
		t.Errorf("origin = %+v", o)
	}
	if c.Flush.Every != 10 {
		t.Errorf("a failed variable changed flush.every to %d", c.Flush.Every)
	}
}

func TestEnvNames(t *testing.T) {
	s := newSchema()
	for _, tc := range [][2]string{
		{"datasets.cache_size", "SCRFS_DATASETS_CACHE_SIZE"},
		{"paths.prefix", "SCRFS_PATHS_PREFIX"},
		{"cluster.node_index", "SCRFS_CLUSTER_NODE_INDEX"},
		{"job.secret", "SCRFS_JOB_SECRET"},
		{"restart.member_timeout", "SCRFS_RESTART_MEMBER_TIMEOUT"},
	} {
		if got := s.byKey[tc[0]].env(); got != tc[1] {
			t.Errorf("env(%s) = %s, want %s", tc[0], got, tc[1])
		}
	}
	// Every key can be set from the environment with the value TOML() prints.
	c := Default()
	for _, f := range s.fields {
		var env string
		switch p := f.ptr(c).(type) {
		case *[]string:
			env = strings.Join(*p, ",")
		default:
			env = strings.Trim(f.show(c), `"[]`)
		}
		d := Default()
		if errs := applyEnv(d, []string{f.env() + "=" + env}, nil); len(errs) > 0 {
			t.Errorf("%s=%s: %v", f.env(), env, errs[0])
		}
		if !reflect.DeepEqual(d, c) {
			t.Errorf("%s=%s changed the config", f.env(), env)
		}
	}
}
