package config

import (
	"reflect"
	"testing"
	"time"
)

// documented is the defaults table of the brief and docs/configuration.md,
// written out by hand so a change to default.toml must be deliberate.
func documented() *Config {
	return &Config{
		Job:   Job{ID: "", SecretFile: "", Secret: ""},
		Paths: Paths{CacheBase: "/dev/shm", ControlBase: "/dev/shm", Prefix: ""},
		Datasets: Datasets{
			Match:     `^(?P<dataset>[^/]+)/`,
			Complete:  []string{"next", "marker:COMPLETE"},
			CacheSize: 2,
		},
		Fuse: Fuse{
			Mount: "auto", Passthrough: "auto", MaxWrite: 1 << 20,
			EntryTimeout: Duration{60 * time.Second}, AttrTimeout: Duration{60 * time.Second},
			NegativeTimeout: Duration{60 * time.Second},
		},
		Metrics: Metrics{Listen: "127.0.0.1:9464"},
		Log:     Log{Level: "info", Format: "text"},
		Cluster: Cluster{
			Nodes: []string{}, NodeIndex: -1, Port: 7411, FailureDomains: []string{},
			ConnectTimeout: Duration{60 * time.Second}, IOTimeout: Duration{30 * time.Second},
			Heartbeat: Duration{2 * time.Second},
		},
		Redundancy: Redundancy{
			Scheme: "auto", SetSize: 8, Replicas: 1, Parity: 2,
			Timeout: Duration{60 * time.Second}, PieceSize: 4 << 20,
		},
		Flush:     Flush{Every: 10, Async: true, Bandwidth: 0, Streams: 4, CRC: true},
		Fetch:     Fetch{Enabled: true},
		Restart:   Restart{FromCache: true, MemberTimeout: Duration{120 * time.Second}},
		Namespace: Namespace{ReadCache: "25%", FetchWhole: 1 << 30},
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default() does not validate: %v", err)
	}
	if want := documented(); !reflect.DeepEqual(c, want) {
		t.Errorf("Default() differs from the documented defaults:\n%s\nwant\n%s", c.TOML(), want.TOML())
	}
}

func TestDefaultFileSetsEveryKey(t *testing.T) {
	origins := map[string]origin{}
	if errs := applyFile(&Config{}, "default.toml", defaultTOML, origins); len(errs) > 0 {
		t.Fatalf("default.toml: %v", errs)
	}
	for _, f := range newSchema().fields {
		if o, ok := origins[f.key()]; !ok || o.line == 0 {
			t.Errorf("default.toml does not set %s (origin %+v)", f.key(), o)
		}
	}
}

func TestDefaultIsFresh(t *testing.T) {
	a := Default()
	a.Datasets.Complete[0] = "changed"
	a.Cluster.Nodes = append(a.Cluster.Nodes, "x")
	if b := Default(); b.Datasets.Complete[0] != "next" || len(b.Cluster.Nodes) != 0 {
		t.Error("Default() values share state")
	}
}

func TestSchemaMatchesStruct(t *testing.T) {
	s := newSchema()
	if len(s.sections) != reflect.TypeFor[Config]().NumField() {
		t.Errorf("sections %v", s.sections)
	}
	seen := map[string]bool{}
	for _, f := range s.fields {
		if f.name == "" || f.help == "" {
			t.Errorf("field %s.%q lacks a toml or help tag", f.section, f.name)
		}
		if seen[f.env()] {
			t.Errorf("two keys share the variable %s", f.env())
		}
		seen[f.env()] = true
		switch f.ptr(&Config{}).(type) {
		case *string, *int, *bool, *[]string, *Size, *Duration:
		default:
			t.Errorf("%s has a type the loader cannot set", f.key())
		}
	}
}
