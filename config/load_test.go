package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeFile writes a config file in a temporary directory and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadNothing(t *testing.T) {
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Job.ID = "local"
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load of nothing differs from the defaults:\n%s", c.TOML())
	}
}

func TestLoadPrecedence(t *testing.T) {
	sys := writeFile(t, "system.toml", `
[datasets]
cache_size = 5
complete = ["next", "marker:A", "marker:B"]
[flush]
every = 3
streams = 8
[redundancy]
set_size = 4
`)
	user := writeFile(t, "user.toml", `
[datasets]
cache_size = 6
complete = ["rename"]
[flush]
every = 4
`)
	env := []string{"SCRFS_DATASETS_CACHE_SIZE=7", "SCRFS_REDUNDANCY_SET_SIZE=3"}

	c, err := Load(Sources{SystemFile: sys, UserFile: user, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what      string
		got, want any
	}{
		{"env beats user and system", c.Datasets.CacheSize, 7},
		{"env beats system", c.Redundancy.SetSize, 3},
		{"user beats system", c.Flush.Every, 4},
		{"system-only key survives the user file", c.Flush.Streams, 8},
		{"user list replaces system list", c.Datasets.Complete, []string{"rename"}},
		{"untouched key keeps its default", c.Cluster.Port, 7411},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.what, tc.got, tc.want)
		}
	}

	// Each layer alone.
	c, err = Load(Sources{SystemFile: sys})
	if err != nil || c.Datasets.CacheSize != 5 || len(c.Datasets.Complete) != 3 {
		t.Errorf("system file only: %v %+v", err, c)
	}
	c, err = Load(Sources{UserFile: user})
	if err != nil || c.Datasets.CacheSize != 6 || c.Flush.Streams != 4 {
		t.Errorf("user file only: %v %+v", err, c)
	}
	// An empty list in a higher layer empties the list.
	c, err = Load(Sources{SystemFile: sys, Env: []string{"SCRFS_DATASETS_COMPLETE="}})
	if err != nil || len(c.Datasets.Complete) != 0 {
		t.Errorf("empty env list: %v %v", err, c.Datasets.Complete)
	}
}

func TestLoadMissingFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(Sources{SystemFile: filepath.Join(dir, "none.toml")}); err != nil {
		t.Errorf("missing system file: %v", err)
	}
	_, err := Load(Sources{UserFile: filepath.Join(dir, "none.toml")})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "none.toml") {
		t.Errorf("missing user file: %v", err)
	}
	// A system file that exists but cannot be read (a directory) is an error.
	if _, err := Load(Sources{SystemFile: dir}); err == nil {
		t.Error("unreadable system file: no error")
	}
}

func TestLoadJobID(t *testing.T) {
	user := writeFile(t, "u.toml", "[job]\nid = \"from-file\"\n")
	for _, tc := range []struct {
		name string
		src  Sources
		want string
	}{
		{"default", Sources{}, "local"},
		{"slurm", Sources{Env: []string{"SLURM_JOB_ID=4242"}}, "4242"},
		{"empty slurm", Sources{Env: []string{"SLURM_JOB_ID="}}, "local"},
		{"file beats slurm", Sources{UserFile: user, Env: []string{"SLURM_JOB_ID=4242"}}, "from-file"},
		{"env beats file", Sources{UserFile: user, Env: []string{"SCRFS_JOB_ID=e1", "SLURM_JOB_ID=4242"}}, "e1"},
	} {
		c, err := Load(tc.src)
		if err != nil || c.Job.ID != tc.want {
			t.Errorf("%s: job.id = %v, %v; want %s", tc.name, c, err, tc.want)
		}
	}
	_, err := Load(Sources{Env: []string{"SLURM_JOB_ID=12/34"}})
	if err == nil || !strings.Contains(err.Error(), "environment SLURM_JOB_ID=\"12/34\": job.id") {
		t.Errorf("bad SLURM_JOB_ID: %v", err)
	}
}

func TestLoadRelativePaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	user := writeFile(t, "u.toml", "[paths]\nprefix = \"out/run1\"\n[job]\nsecret_file = \"s\"\n[cluster]\nhostfile = \"../hosts\"\n")
	c, err := Load(Sources{UserFile: user})
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	for got, want := range map[string]string{
		c.Paths.Prefix:     filepath.Join(wd, "out/run1"),
		c.Job.SecretFile:   filepath.Join(wd, "s"),
		c.Cluster.Hostfile: filepath.Join(filepath.Dir(wd), "hosts"),
	} {
		if got != want {
			t.Errorf("resolved %q, want %q", got, want)
		}
	}
	c, err = Load(Sources{Env: []string{"SCRFS_PATHS_PREFIX=."}})
	if err != nil || c.Paths.Prefix != wd {
		t.Errorf("prefix \".\" = %q, %v; want %q", c.Paths.Prefix, err, wd)
	}
	// cache_base is not resolved: a relative one is an error.
	_, err = Load(Sources{Env: []string{"SCRFS_PATHS_CACHE_BASE=cache"}})
	if err == nil || !strings.Contains(err.Error(), "paths.cache_base") {
		t.Errorf("relative cache_base: %v", err)
	}
}

func TestLoadErrorLocations(t *testing.T) {
	user := writeFile(t, "scrfs.toml", `# my job
[datasets]
match = '^ckpt_(\d+)'

cache_sise = 3
cache_size = 0
[Fuse]
[flush]
every = "ten"
`)
	_, err := Load(Sources{UserFile: user, Env: []string{"SCRFS_FLUSH_STREAMS=0"}})
	want := []string{
		`config ` + user + `: line 5: unknown key "datasets.cache_sise" (did you mean "datasets.cache_size"?)`,
		`config ` + user + `: line 7: unknown table [Fuse] (did you mean [fuse]?)`,
		`config ` + user + `: line 9: flush.every = "ten": expected an integer, got a string`,
		`config ` + user + `: line 3: datasets.match = "^ckpt_(\d+)": has no named group (?P<dataset>...)`,
		`config ` + user + `: line 6: datasets.cache_size = 0: must be at least 1 (SCR_CACHE_SIZE: completed checkpoints kept in cache)`,
		`config: environment SCRFS_FLUSH_STREAMS="0": flush.streams = 0: must be between 1 and 64`,
	}
	ps := problems(t, err)
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(want), err)
	}
	for i, p := range ps {
		if !strings.HasPrefix(p.Error(), want[i]) {
			t.Errorf("problem %d:\n got  %s\n want %s", i, p.Error(), want[i])
		}
	}
	if !errors.Is(err, ErrUnknownKey) || !errors.Is(err, ErrInvalid) {
		t.Errorf("joined error does not wrap both sentinels")
	}
	if ps[0].File != user || ps[0].Line != 5 || ps[0].Key != "datasets.cache_sise" {
		t.Errorf("fields of the first problem: %+v", ps[0])
	}
}

func TestLoadSyntaxError(t *testing.T) {
	user := writeFile(t, "bad.toml", "[datasets]\ncache_size = 2\ncache_size = = 3\n")
	_, err := Load(Sources{UserFile: user})
	ps := problems(t, err)
	if len(ps) != 1 || ps[0].Line != 3 || !strings.HasPrefix(ps[0].Error(), "config "+user+": line 3: invalid TOML: ") {
		t.Errorf("syntax error: %v", err)
	}
}

func TestLoadFileShapes(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"key outside a table", "cache_size = 3\n",
			`line 1: unknown key "cache_size" outside any table (did you mean "datasets.cache_size"?)`},
		{"section as a value", "log = \"debug\"\n", `line 1: log = "debug": expected a table [log], got a string`},
		{"array of tables", "[[log]]\nlevel = \"debug\"\n", `line 1: log = {...}: expected a table [log], got an array of tables`},
		{"implicit unknown table", "[foo.bar]\nx = 1\n", `line 1: unknown table [foo]`},
		{"implicit unknown key", "[datasets.foo.bar]\nx = 1\n", `line 1: unknown key "datasets.foo"`},
		{"dotted unknown key", "[flush]\n\nfetch.enabled = true\n", `line 3: unknown key "flush.fetch"`},
		{"dotted key under a value", "[datasets]\ncache_size.x = 1\n", `line 2: datasets.cache_size = {...}: expected an integer, got a table`},
		{"dotted key", "datasets.cache_sise = 3\n", `line 1: unknown key "datasets.cache_sise" (did you mean "datasets.cache_size"?)`},
		{"inline table", "datasets = {cache_size = \"x\"}\n", `line 1: datasets.cache_size = "x": expected an integer, got a string`},
		{"table where a value goes", "[datasets.cache_size]\nx = 1\n", `line 1: datasets.cache_size = {...}: expected an integer, got a table`},
		{"wrong case", "[datasets]\nCache_Size = 3\n", `line 2: unknown key "datasets.Cache_Size" (did you mean "datasets.cache_size"?)`},
		{"list of non-strings", "[cluster]\nnodes = [\"a\", 2]\n", `line 2: cluster.nodes = ["a", 2]: expected a list of strings, entry 2 is an integer`},
		{"float for int", "[flush]\nevery = 2.5\n", `line 2: flush.every = 2.5: expected an integer, got a float`},
		{"size as float", "[fuse]\nmax_write = 1.5\n", `line 2: fuse.max_write = 1.5: expected a size, got a float`},
		{"bool as string", "[flush]\nasync = \"yes\"\n", `line 2: flush.async = "yes": expected a boolean`},
		{"secret of wrong type", "[job]\nsecret = 1234567890123456789\n", `line 2: job.secret = "<redacted>": expected a string`},
	} {
		user := writeFile(t, "c.toml", tc.text)
		_, err := Load(Sources{UserFile: user})
		if err == nil || !strings.HasPrefix(err.Error(), "config "+user+": "+tc.want) {
			t.Errorf("%s:\n got  %v\n want %s", tc.name, err, tc.want)
		}
		if ps := problems(t, err); len(ps) != 1 {
			t.Errorf("%s: %d problems, want 1: %v", tc.name, len(ps), err)
		}
	}
}

func TestLoadSuggestions(t *testing.T) {
	for _, tc := range []struct {
		text, want string
	}{
		{"[flush]\nbandwith = \"1MB\"\n", `"flush.bandwidth"`},
		{"[cluster]\nnode = [\"a\"]\n", `"cluster.nodes"`},
		{"[fetch]\nevery = 2\n", `"flush.every"`},
		{"[redundancy]\nsetsize = 4\n", `"redundancy.set_size"`},
		{"[log]\nlvl = \"debug\"\n", `"log.level"`},
		{"[cluser]\nport = 1\n", `[cluster]`},
		{"[redundancy]\nxyzzy = 1\n", ""},
		{"[foo]\nx = 1\n", ""},
	} {
		user := writeFile(t, "c.toml", tc.text)
		_, err := Load(Sources{UserFile: user})
		if err == nil {
			t.Errorf("%q: no error", tc.text)
			continue
		}
		msg := err.Error()
		if tc.want == "" && strings.Contains(msg, "did you mean") {
			t.Errorf("%q: unexpected suggestion: %s", tc.text, msg)
		}
		if tc.want != "" && !strings.HasSuffix(msg, "(did you mean "+tc.want+"?)") {
			t.Errorf("%q: got %s, want suggestion %s", tc.text, msg, tc.want)
		}
		if !errors.Is(err, ErrUnknownKey) {
			t.Errorf("%q: not ErrUnknownKey", tc.text)
		}
	}
}

func TestTOMLRoundTripAndRedaction(t *testing.T) {
	user := writeFile(t, "u.toml", `
[datasets]
match = '^ckpt/step_(?P<dataset>\d+)_rank_\d+\.bin$'
complete = ["marker:.metadata", "idle:90s"]
[cluster]
nodes = ["n1", "n2:7000"]
failure_domains = ["r1/e1", "r2/e1"]
[flush]
bandwidth = "1.5GiB"
[redundancy]
piece_size = 65536
`)
	secret := "s3cr3t-s3cr3t-s3cr3t"
	c, err := Load(Sources{UserFile: user, Env: []string{"SCRFS_JOB_SECRET=" + secret}})
	if err != nil {
		t.Fatal(err)
	}
	out := c.TOML()
	if strings.Contains(string(out), secret) || !strings.Contains(string(out), `secret = "<redacted>"`) {
		t.Errorf("secret not redacted:\n%s", out)
	}
	if c.Job.Secret != secret {
		t.Error("TOML() modified the config")
	}
	// Loading the printed config gives the same config back (the redacted
	// secret aside, which by design does not validate).
	c.Job.Secret = ""
	back, err := Load(Sources{UserFile: writeFile(t, "back.toml", string(c.TOML()))})
	if err != nil {
		t.Fatalf("reloading TOML(): %v\n%s", err, c.TOML())
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip differs:\n%s\nvs\n%s", back.TOML(), c.TOML())
	}
	// Nothing in the printout is empty-by-omission: every key is there.
	for _, f := range newSchema().fields {
		if !strings.Contains(string(out), "\n"+f.name+" = ") {
			t.Errorf("TOML() lacks %s", f.key())
		}
	}
	_, err = Load(Sources{UserFile: writeFile(t, "red.toml", string(out))})
	if err == nil || !strings.Contains(err.Error(), "job.secret") {
		t.Errorf("a redacted dump loaded without error: %v", err)
	}
}

// BenchmarkLoad measures a Load with a small user file and a few variables:
// the cost scrfs pays once per command.
func BenchmarkLoad(b *testing.B) {
	user := []byte("[paths]\nprefix = \"/lustre/me/run1\"\n[datasets]\ncache_size = 3\n[flush]\nevery = 5\n")
	src := Sources{SystemFile: "/nonexistent/scrfs.toml", UserFile: "user.toml",
		Env: []string{"SCRFS_FLUSH_STREAMS=8", "SLURM_JOB_ID=42", "HOME=/root"}}
	read := func(name string) ([]byte, error) {
		if name == src.UserFile {
			return user, nil
		}
		return nil, fs.ErrNotExist
	}
	if _, err := load(src, read); err != nil { // untimed warm-up
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := load(src, read); err != nil {
			b.Fatal(err)
		}
	}
}
