package config

import (
	"errors"
	"strings"

	"github.com/BurntSushi/toml"
)

// applyFile decodes the TOML document data onto c key by key, so a key the
// document does not mention keeps its value from the layer below, and a list
// it sets replaces the old list. name is the file name used in errors; if
// origins is non-nil, the file and line of every key set are recorded in it.
//
// It returns every problem in the document (unknown keys, wrong types) in
// document order; a key that fails keeps its previous value.
//
// Why not toml.Decode straight into Config: that matches keys
// case-insensitively, stops at the first type error, and keeps key positions
// private, so its errors could neither be complete nor say which line to fix.
func applyFile(c *Config, name string, data []byte, origins map[string]origin) []*Error {
	var top map[string]toml.Primitive
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		return []*Error{syntaxError(name, err)}
	}
	d := &docReader{md: &md, top: top, tables: make(map[string]map[string]toml.Primitive)}
	s := newSchema()
	var errs []*Error
	tableOK := make(map[string]bool) // tables checked: known and a table?
	done := make(map[string]bool)    // "table.key" already applied
	for _, k := range md.Keys() {
		// Tables and keys made implicitly ("[a.b.c]", "a.b.c = 1") are not
		// in Keys themselves, so each is handled when the first key under
		// it comes along, and takes that key's line if it has none.
		ok, checked := tableOK[k[0]]
		if !checked {
			e := checkTable(s, d, k)
			if e != nil {
				e.File = name
				errs = append(errs, e)
			}
			ok = e == nil
			tableOK[k[0]] = ok
		}
		if len(k) < 2 || !ok || done[k[0]+"."+k[1]] {
			continue
		}
		done[k[0]+"."+k[1]] = true
		key := k[:2]
		raw, line := d.lookup(key, k)
		f := s.byKey[k[0]+"."+k[1]]
		if f == nil {
			errs = append(errs, &Error{
				File: name, Line: line, Key: key.String(), Kind: ErrUnknownKey,
				Msg: "unknown key " + quoteKey(key.String()) + didYouMean(quoteKey(s.suggestKey(k[0], k[1]))),
			})
			continue
		}
		if err := f.setTOML(c, raw); err != nil {
			shown := showRaw(raw)
			if f.redact {
				shown = quote(redacted)
			}
			errs = append(errs, &Error{
				File: name, Line: line, Key: f.key(), Value: shown,
				Msg: err.Error(), Kind: ErrInvalid,
			})
			continue
		}
		if origins != nil {
			origins[f.key()] = origin{file: name, line: line}
		}
	}
	return errs
}

// checkTable checks the table of key k: it must be one of the known tables,
// and a table rather than a value or an array of tables.
func checkTable(s *schema, d *docReader, k toml.Key) *Error {
	name := k[0]
	key := toml.Key{name}
	raw, line := d.lookup(key, k)
	_, isTable := raw.(map[string]any)
	switch {
	case s.isSection(name) && isTable:
		return nil
	case s.isSection(name):
		return &Error{
			Line: line, Key: key.String(), Value: showRaw(raw), Kind: ErrInvalid,
			Msg: "expected a table [" + name + "], got " + tomlTypeName(raw),
		}
	case isTable:
		return &Error{
			Line: line, Key: key.String(), Kind: ErrUnknownKey,
			Msg: "unknown table [" + key.String() + "]" + didYouMean(bracket(s.suggestSection(name))),
		}
	default:
		return &Error{
			Line: line, Key: key.String(), Kind: ErrUnknownKey,
			Msg: "unknown key " + quoteKey(key.String()) + " outside any table" + didYouMean(quoteKey(s.suggestKey("", name))),
		}
	}
}

// docReader finds the value and line of any key of a decoded document.
type docReader struct {
	md     *toml.MetaData
	top    map[string]toml.Primitive
	tables map[string]map[string]toml.Primitive // decoded tables by key, memoised
}

// lookup returns the value of key k and the line it was set on. A table made
// implicitly has no line of its own; it gets that of within, a key under it.
// The line is 0 if neither is known, raw nil if k is not in the document.
func (d *docReader) lookup(k, within toml.Key) (raw any, line int) {
	raw, line = d.find(k)
	if line == 0 && len(within) > len(k) {
		_, line = d.find(within)
	}
	return raw, line
}

// find returns the value and line of key k, as lookup without the fallback.
func (d *docReader) find(k toml.Key) (raw any, line int) {
	prim, ok := d.top[k[0]]
	for i := 1; ok && i < len(k); i++ {
		parent := k[:i].String()
		m, seen := d.tables[parent]
		if !seen {
			if d.md.PrimitiveDecode(prim, &m) != nil {
				m = nil // not a table (or an array of tables): nothing below
			}
			d.tables[parent] = m
		}
		prim, ok = m[k[i]]
	}
	if !ok {
		return nil, 0
	}
	// MetaData keeps key positions private; the one public way to read them
	// is the ParseError that PrimitiveDecode builds when an Unmarshaler
	// fails. The probe captures the value and fails on purpose.
	var p probe
	var pe toml.ParseError
	if errors.As(d.md.PrimitiveDecode(prim, &p), &pe) {
		line = pe.Position.Line
	}
	return p.v, line
}

// errProbe is returned by probe.UnmarshalTOML; it never leaves this file.
var errProbe = errors.New("probe")

// probe captures a decoded TOML value; see docReader.lookup.
type probe struct{ v any }

// UnmarshalTOML implements toml.Unmarshaler.
func (p *probe) UnmarshalTOML(v any) error {
	p.v = v
	return errProbe
}

// syntaxError turns a TOML parse failure into an *Error with its line.
func syntaxError(name string, err error) *Error {
	e := &Error{File: name, Kind: ErrInvalid, Cause: err, Msg: err.Error()}
	var pe toml.ParseError
	if errors.As(err, &pe) {
		e.Line = pe.Position.Line
		e.Msg = "invalid TOML: " + pe.Message
		if pe.LastKey != "" {
			e.Msg += " (after key " + quoteKey(pe.LastKey) + ")"
		}
	}
	return e
}

// quoteKey quotes a key for a message, or returns "" for "". A key that
// toml.Key.String has already quoted (it has odd characters) stays as it is.
func quoteKey(k string) string {
	if k == "" || strings.HasPrefix(k, `"`) {
		return k
	}
	return `"` + k + `"`
}

// bracket writes a table name as a TOML header, or returns "" for "".
func bracket(s string) string {
	if s == "" {
		return ""
	}
	return "[" + s + "]"
}
