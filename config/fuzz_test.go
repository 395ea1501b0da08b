package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes as the user file. Load must not panic; it
// either fails with *Error values or returns a config that validates and
// survives a round trip through TOML().
func FuzzLoad(f *testing.F) {
	f.Add(defaultTOML)
	if doc, err := os.ReadFile("../docs/configuration.md"); err == nil {
		for _, b := range tomlBlocks(string(doc)) {
			f.Add([]byte(b))
		}
	}
	for _, s := range []string{
		"",
		"[datasets]\ncache_sise = 3\n",
		"[datasets]\ncache_size = 0\n",
		"datasets.cache_size = 3\n",
		"datasets = {cache_size = \"x\"}\n",
		"[[log]]\nlevel = \"debug\"\n",
		"[foo.bar]\nx = 1\n",
		"[fuse]\nmax_write = 1.5\nentry_timeout = 60\n",
		"[cluster]\nnodes = [\"a\", \"a:7411\"]\nfailure_domains = [\"r//1\"]\n",
		"[datasets]\nmatch = '^(?P<dataset>['\ncomplete = [\"idle:0s\", \"marker:\"]\n",
		"[job]\nsecret = \"0123456789abcdef\"\nid = \"x/y\"\n",
		"[paths]\nprefix = \"rel\"\n",
		"[datasets.cache_size]\n",
		"a = 1\na = 2\n",
		"[flush]\nbandwidth = \"1.5GiB\"\nevery = 9223372036854775807\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		read := func(string) ([]byte, error) { return data, nil }
		c, err := load(Sources{UserFile: "fuzz.toml"}, read)
		if err != nil {
			for _, p := range problems(t, err) {
				if p.Error() == "" {
					t.Fatal("empty error message")
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load succeeded but Validate fails: %v", err)
		}
		c.Job.Secret = "" // TOML() redacts it
		out := c.TOML()
		back, err := load(Sources{UserFile: "out.toml"}, func(string) ([]byte, error) { return out, nil })
		if err != nil {
			t.Fatalf("TOML() does not load back: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("TOML() round trip differs:\n%s\nvs\n%s", back.TOML(), out)
		}
	})
}

// FuzzSize checks ParseSize never panics and that String is exact.
func FuzzSize(f *testing.F) {
	for _, s := range []string{
		"0", "4096", "512KiB", "1MiB", "1.5GiB", "500MB", "1 tb", "-1", "1.", ".5", "1e3",
		"0.0009765625KiB", "8388607TiB", "9223372036854775808", "1.3B", "  7k ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, v)
		}
		back, err := ParseSize(v.String())
		if err != nil || back != v {
			t.Fatalf("ParseSize(%q) = %d, String %q parses to %d, %v", s, v, v.String(), back, err)
		}
	})
}

// FuzzEnv feeds an arbitrary SCRFS_ variable. Load must not panic, must name
// the variable in any error it reports about it, and otherwise validate.
func FuzzEnv(f *testing.F) {
	for _, kv := range [][2]string{
		{"DATASETS_CACHE_SIZE", "3"}, {"FLUSH_EVERY", "ten"}, {"CLUSTER_NODES", "a, b ,c"},
		{"DATASETS_COMPLETE", ""}, {"FUSE_DEBUG", "yes"}, {"FLUSH_BANDWIDTH", "1.5GiB"},
		{"CLUSTER_HEARTBEAT", "1h"}, {"DATASETS_CACHESIZE", "1"}, {"CONTROL", "/x"},
		{"JOB_SECRET", "short"}, {"PATHS_PREFIX", "."}, {"DATASETS_MATCH", "("},
	} {
		f.Add(kv[0], kv[1])
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		if strings.ContainsRune(name, '=') {
			return // would split differently: not a variable name
		}
		c, err := load(Sources{Env: []string{"SCRFS_" + name + "=" + value}}, nil)
		if err == nil {
			if err := c.Validate(); err != nil {
				t.Fatalf("Load succeeded but Validate fails: %v", err)
			}
			return
		}
		for _, p := range problems(t, err) {
			if p.Env != "" && !strings.Contains(p.Error(), p.Env) {
				t.Fatalf("error does not name its variable: %v", p)
			}
		}
	})
}
