package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// The configuration reference must stay true to the code: these tests read
// docs/configuration.md and check its tables, examples and defaults.

func readDocs(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatalf("reading the configuration reference: %v", err)
	}
	return string(b)
}

// kindName is the type column a key should have.
func kindName(p any) string {
	switch p.(type) {
	case *string:
		return "string"
	case *int:
		return "int"
	case *bool:
		return "bool"
	case *[]string:
		return "list"
	case *Size:
		return "size"
	case *Duration:
		return "duration"
	}
	return "?"
}

func TestDocsTables(t *testing.T) {
	doc := readDocs(t)
	s := newSchema()
	def := Default()
	rows := map[string]bool{}
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		key := strings.Trim(strings.TrimSpace(cells[0]), "`")
		f := s.byKey[key]
		if f == nil {
			continue // another table (value types, rules)
		}
		if len(cells) != 6 {
			t.Errorf("%s: %d columns, want 6", key, len(cells))
			continue
		}
		if rows[key] {
			t.Errorf("%s: described twice", key)
		}
		rows[key] = true
		typ, dflt, env, scr := cells[1], strings.Trim(cells[2], "`"), strings.Trim(cells[3], "`"), strings.Trim(cells[4], "`")
		if want := kindName(f.ptr(def)); typ != want {
			t.Errorf("%s: type %q, want %q", key, typ, want)
		}
		if env != f.env() {
			t.Errorf("%s: environment %q, want %q", key, env, f.env())
		}
		wantSCR := f.scr
		if wantSCR == "" {
			wantSCR = "—"
		}
		if scr != wantSCR {
			t.Errorf("%s: SCR %q, want %q", key, scr, wantSCR)
		}
		var m map[string]any
		if _, err := toml.Decode("v = "+dflt, &m); err != nil {
			t.Errorf("%s: default %s is not a TOML value: %v", key, dflt, err)
			continue
		}
		got := &Config{}
		if err := f.setTOML(got, m["v"]); err != nil {
			t.Errorf("%s: default %s: %v", key, dflt, err)
			continue
		}
		if g, w := reflect.ValueOf(f.ptr(got)).Elem().Interface(), reflect.ValueOf(f.ptr(def)).Elem().Interface(); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: documented default %s, code has %s", key, dflt, f.show(def))
		}
	}
	for _, f := range s.fields {
		if !rows[f.key()] {
			t.Errorf("%s has no row in the reference", f.key())
		}
		if !strings.Contains(doc, "`"+f.key()+"`") {
			t.Errorf("%s is not mentioned as `%s`", f.key(), f.key())
		}
	}
}

// tomlBlocks returns the ```toml code blocks of doc.
func tomlBlocks(doc string) []string {
	var blocks []string
	for _, part := range strings.Split(doc, "```toml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		blocks = append(blocks, block)
	}
	return blocks
}

func TestDocsExamplesLoad(t *testing.T) {
	blocks := tomlBlocks(readDocs(t))
	if len(blocks) != 4 {
		t.Fatalf("found %d TOML examples, want 3 examples and the defaults", len(blocks))
	}
	for i, b := range blocks {
		p := writeFile(t, "example.toml", b)
		c, err := Load(Sources{UserFile: p, Env: []string{"SLURM_JOB_ID=777"}})
		if err != nil {
			t.Errorf("example %d does not load: %v\n%s", i+1, err, b)
			continue
		}
		if c.Job.ID != "777" {
			t.Errorf("example %d: job.id %q", i+1, c.Job.ID)
		}
	}
	if blocks[len(blocks)-1] != string(defaultTOML) {
		t.Error("the defaults shown in the reference differ from config/default.toml")
	}
}
