package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// field is one configuration key, described by the tags of a Config field.
type field struct {
	section string // TOML table, e.g. "datasets"
	name    string // key within the table, e.g. "cache_size"
	scr     string // SCR equivalent, may be ""
	help    string // short meaning, repeated in validation errors
	redact  bool   // the value is a secret: never shown
	index   [2]int // reflect field index in Config, then in the section struct
}

// schema is the set of keys Config has, in declaration order. It is derived
// from the type on demand rather than kept in a package variable; building it
// costs microseconds and happens a few times per Load.
type schema struct {
	fields   []field
	byKey    map[string]*field // "section.name" -> field
	sections []string          // in declaration order
}

// newSchema reads the keys from Config's struct tags.
func newSchema() *schema {
	s := &schema{byKey: make(map[string]*field)}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		sf := ct.Field(i)
		section := sf.Tag.Get("toml")
		s.sections = append(s.sections, section)
		for j := range sf.Type.NumField() {
			kf := sf.Type.Field(j)
			s.fields = append(s.fields, field{
				section: section,
				name:    kf.Tag.Get("toml"),
				scr:     kf.Tag.Get("scr"),
				help:    kf.Tag.Get("help"),
				redact:  kf.Tag.Get("redact") == "true",
				index:   [2]int{i, j},
			})
		}
	}
	for i := range s.fields {
		s.byKey[s.fields[i].key()] = &s.fields[i]
	}
	return s
}

// isSection reports whether name is a known table.
func (s *schema) isSection(name string) bool {
	for _, sec := range s.sections {
		if sec == name {
			return true
		}
	}
	return false
}

// key returns "section.name".
func (f *field) key() string { return f.section + "." + f.name }

// env returns the environment variable that overrides f.
func (f *field) env() string {
	return "SCRFS_" + strings.ToUpper(f.section) + "_" + strings.ToUpper(f.name)
}

// hint returns the parenthesised explanation appended to validation errors.
func (f *field) hint() string {
	if strings.HasPrefix(f.scr, "SCR_") {
		return " (" + f.scr + ": " + f.help + ")"
	}
	return " (" + f.help + ")"
}

// ptr returns a pointer to f's field in c: *string, *int, *bool, *[]string,
// *Size or *Duration.
func (f *field) ptr(c *Config) any {
	return reflect.ValueOf(c).Elem().Field(f.index[0]).Field(f.index[1]).Addr().Interface()
}

// setTOML stores a value decoded from TOML (int64, string, bool, []any, ...)
// into f's field of c. On error c is unchanged.
func (f *field) setTOML(c *Config, raw any) error {
	switch p := f.ptr(c).(type) {
	case *string:
		s, ok := raw.(string)
		if !ok {
			return fmt.Errorf("expected a string, got %s", tomlTypeName(raw))
		}
		*p = s
	case *int:
		n, ok := raw.(int64)
		if !ok {
			return fmt.Errorf("expected an integer, got %s", tomlTypeName(raw))
		}
		if int64(int(n)) != n {
			return fmt.Errorf("integer out of range")
		}
		*p = int(n)
	case *bool:
		b, ok := raw.(bool)
		if !ok {
			return fmt.Errorf("expected a boolean (true or false), got %s", tomlTypeName(raw))
		}
		*p = b
	case *[]string:
		arr, ok := raw.([]any)
		if !ok {
			return fmt.Errorf("expected a list of strings, got %s", tomlTypeName(raw))
		}
		list := make([]string, len(arr))
		for i, e := range arr {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("expected a list of strings, entry %d is %s", i+1, tomlTypeName(e))
			}
			list[i] = s
		}
		*p = list
	case *Size:
		return p.UnmarshalTOML(raw)
	case *Duration:
		return p.UnmarshalTOML(raw)
	default:
		return fmt.Errorf("unsupported field type %T", p)
	}
	return nil
}

// setEnv parses an environment value into f's field of c. On error c is
// unchanged. Lists are comma-separated with spaces trimmed; "" is the empty
// list. Booleans accept true/false, 1/0 and yes/no in any case.
func (f *field) setEnv(c *Config, v string) error {
	switch p := f.ptr(c).(type) {
	case *string:
		*p = v
	case *int:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		*p = n
	case *bool:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "1", "yes":
			*p = true
		case "false", "0", "no":
			*p = false
		default:
			return fmt.Errorf("not a boolean (true/false, 1/0, yes/no)")
		}
	case *[]string:
		list := []string{}
		if strings.TrimSpace(v) != "" {
			list = strings.Split(v, ",")
			for i := range list {
				list[i] = strings.TrimSpace(list[i])
			}
		}
		*p = list
	case *Size:
		return p.UnmarshalText([]byte(v))
	case *Duration:
		return p.UnmarshalText([]byte(v))
	default:
		return fmt.Errorf("unsupported field type %T", p)
	}
	return nil
}

// redacted stands in for secrets in errors and in Config.TOML.
const redacted = "<redacted>"

// show formats f's current value in c for an error message.
func (f *field) show(c *Config) string {
	switch p := f.ptr(c).(type) {
	case *string:
		if f.redact && *p != "" {
			return quote(redacted)
		}
		return quote(*p)
	case *[]string:
		return showList(*p)
	case *Size:
		return quote(p.String())
	case *Duration:
		return quote(p.String())
	default:
		return fmt.Sprint(reflect.ValueOf(p).Elem().Interface())
	}
}

// tomlTypeName names the TOML type of a decoded value, for error messages.
func tomlTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case []map[string]any:
		return "an array of tables"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date-time"
	case nil:
		return "nothing"
	}
	return "a date or time"
}

// showRaw formats a decoded TOML value for an error message, shortened so a
// pasted blob does not drown the message.
func showRaw(v any) string {
	switch v := v.(type) {
	case string:
		return quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = showRaw(e)
		}
		return clip("[" + strings.Join(parts, ", ") + "]")
	case map[string]any, []map[string]any:
		return "{...}"
	}
	return clip(fmt.Sprint(v))
}

// showList formats a list of strings as TOML would.
func showList(l []string) string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = quote(e)
	}
	return clip("[" + strings.Join(parts, ", ") + "]")
}

// quote wraps s in double quotes, escaping only when s would otherwise be
// ambiguous, so regular expressions stay readable: "^ckpt_(\d+)".
func quote(s string) string {
	plain := !strings.ContainsRune(s, '"')
	for _, r := range s {
		if !strconv.IsPrint(r) {
			plain = false
			break
		}
	}
	if plain {
		return clip(`"` + s + `"`)
	}
	return clip(strconv.Quote(s))
}

// clip shortens s to about 80 bytes, keeping UTF-8 intact.
func clip(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
