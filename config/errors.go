package config

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors wrapped by every *Error, for callers that test with errors.Is.
var (
	// ErrUnknownKey: a file key or an SCRFS_<SECTION>_ variable names no setting.
	ErrUnknownKey = errors.New("unknown key")
	// ErrInvalid: a file does not parse, or a value has the wrong type or
	// breaks a rule.
	ErrInvalid = errors.New("invalid configuration")
)

// Error is one problem with the configuration. Load and Validate return one
// *Error per problem, joined with errors.Join, so a user sees them all at
// once. Its message reads
//
//	config FILE: line N: environment VAR="v": KEY = VALUE: MSG
//
// with the parts that do not apply left out.
type Error struct {
	File     string // file the value came from; "" if none
	Line     int    // line in File, 1-based; 0 if unknown
	Env      string // environment variable the value came from; "" if none
	EnvValue string // the variable's value, when Env is set
	Key      string // "section.key" (or "section"); "" for whole-file problems
	Value    string // the offending value as TOML-like text; "" to omit "KEY = VALUE"
	Msg      string // what is wrong and what is allowed
	Kind     error  // ErrUnknownKey, ErrInvalid, or nil
	Cause    error  // underlying error (parse error, fs error), may be nil
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config")
	if e.File != "" {
		b.WriteString(" " + e.File)
	}
	b.WriteString(": ")
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Env != "" {
		b.WriteString("environment " + e.Env)
		if e.Kind != ErrUnknownKey {
			b.WriteString("=" + quote(e.EnvValue))
		}
		b.WriteString(": ")
	}
	if e.Key != "" && e.Value != "" {
		b.WriteString(e.Key + " = " + e.Value + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns Kind and Cause, so errors.Is works with both the sentinels
// and the underlying error (for example fs.ErrNotExist).
func (e *Error) Unwrap() []error {
	var out []error
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	return out
}

// origin records where a key's effective value was set, so validation errors
// can point at the line or variable to fix.
type origin struct {
	file     string
	line     int
	env      string
	envValue string
}

// locate fills e's location from the origin of its key, if known.
func (e *Error) locate(origins map[string]origin) {
	o, ok := origins[e.Key]
	if !ok {
		return
	}
	e.File, e.Line, e.Env, e.EnvValue = o.file, o.line, o.env, o.envValue
}

// joinErrors is errors.Join for a slice of *Error.
func joinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}
