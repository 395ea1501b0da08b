package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// RuleKind is the kind of a dataset completion rule.
type RuleKind int

// Completion rule kinds, as written in datasets.complete.
const (
	// RuleNext: a dataset is complete when a newer one starts (SCR's own
	// semantics). Written "next".
	RuleNext RuleKind = iota + 1
	// RuleMarker: complete when a file named Marker appears in the dataset.
	// Written "marker:NAME".
	RuleMarker
	// RuleRename: complete when the dataset directory is renamed into place
	// ("ckpt.tmp" -> "ckpt.100"). Written "rename".
	RuleRename
	// RuleIdle: complete after Idle with no writes and no open files.
	// Written "idle:DURATION".
	RuleIdle
	// RulePointer: complete the datasets being written when a pointer file
	// at the mount root changes (DeepSpeed's latest, Megatron's tracker
	// file, written once a save is done): any, written "pointer", or the
	// one called Marker, written "pointer:NAME".
	RulePointer
)

// String returns the rule kind as written in a file.
func (k RuleKind) String() string {
	switch k {
	case RuleNext:
		return "next"
	case RuleMarker:
		return "marker"
	case RuleRename:
		return "rename"
	case RuleIdle:
		return "idle"
	case RulePointer:
		return "pointer"
	}
	return fmt.Sprintf("RuleKind(%d)", int(k))
}

// CompleteRule is one parsed entry of datasets.complete. Marker is set only
// for RuleMarker and RulePointer (the file's name; "" any), Idle only for
// RuleIdle.
type CompleteRule struct {
	Kind   RuleKind
	Marker string
	Idle   time.Duration
}

// String returns the rule as written in a file; ParseCompleteRule of the
// result gives r back.
func (r CompleteRule) String() string {
	switch r.Kind {
	case RuleMarker:
		return "marker:" + r.Marker
	case RulePointer:
		if r.Marker != "" {
			return "pointer:" + r.Marker
		}
	case RuleIdle:
		return "idle:" + Duration{r.Idle}.String()
	}
	return r.Kind.String()
}

// ruleSyntax lists what datasets.complete accepts, for error messages.
const ruleSyntax = `allowed: "next", "rename", "pointer", "pointer:NAME", "marker:NAME", "idle:DURATION"`

// ParseCompleteRule parses one entry of datasets.complete: "next", "rename",
// "pointer", "pointer:NAME", "marker:NAME" (NAME a file name: not empty, no "/", not "." or "..", no
// surrounding spaces) or "idle:DURATION" (a positive Go duration).
func ParseCompleteRule(s string) (CompleteRule, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	switch {
	case kind == "next" && !hasArg:
		return CompleteRule{Kind: RuleNext}, nil
	case kind == "rename" && !hasArg:
		return CompleteRule{Kind: RuleRename}, nil
	case kind == "pointer" && !hasArg:
		return CompleteRule{Kind: RulePointer}, nil
	case (kind == "marker" || kind == "pointer") && hasArg:
		if arg == "" || arg == "." || arg == ".." || strings.ContainsAny(arg, "/\x00") || strings.TrimSpace(arg) != arg {
			return CompleteRule{}, fmt.Errorf("rule %q: the %s must be a file name (not empty, no \"/\", no surrounding spaces)", s, kind)
		}
		if kind == "pointer" {
			return CompleteRule{Kind: RulePointer, Marker: arg}, nil
		}
		return CompleteRule{Kind: RuleMarker, Marker: arg}, nil
	case kind == "idle" && hasArg:
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 {
			return CompleteRule{}, fmt.Errorf("rule %q: idle needs a positive duration like \"idle:30s\"", s)
		}
		return CompleteRule{Kind: RuleIdle, Idle: d}, nil
	}
	return CompleteRule{}, fmt.Errorf("rule %q is not known; %s", s, ruleSyntax)
}

// parseCompleteRules parses a whole datasets.complete list and rejects
// duplicates: the same marker or pointer twice, or next, rename or idle
// more than once
// (two idle rules with different durations cannot both be meant).
func parseCompleteRules(list []string) ([]CompleteRule, error) {
	rules := make([]CompleteRule, 0, len(list))
	for _, s := range list {
		r, err := ParseCompleteRule(s)
		if err != nil {
			return nil, err
		}
		for _, prev := range rules {
			if prev.Kind == r.Kind && (r.Kind != RuleMarker && r.Kind != RulePointer || prev.Marker == r.Marker) {
				return nil, fmt.Errorf("rule %q repeats rule %q; give each rule once", s, prev.String())
			}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// CompleteRules returns datasets.complete parsed, in order. It parses on every
// call. Precondition: c validates; otherwise it returns nil.
func (c *Config) CompleteRules() []CompleteRule {
	rules, err := parseCompleteRules(c.Datasets.Complete)
	if err != nil {
		return nil
	}
	return rules
}

// MatchRegexp returns datasets.match compiled. The expression is matched
// against the path of a new file or directory relative to the mount root,
// without leading slash, directories with a trailing "/"; the submatch named
// "dataset" names the dataset. It compiles on every call, so keep the result.
// Precondition: c validates; otherwise it returns nil.
func (c *Config) MatchRegexp() *regexp.Regexp {
	re, err := compileMatch(c.Datasets.Match)
	if err != nil {
		return nil
	}
	return re
}

// compileMatch compiles a datasets.match expression and checks it has the
// named group "dataset".
func compileMatch(expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("does not compile: %v", err)
	}
	if re.SubexpIndex("dataset") < 0 {
		return nil, fmt.Errorf("has no named group (?P<dataset>...) to name the dataset")
	}
	return re, nil
}
