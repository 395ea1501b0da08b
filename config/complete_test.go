package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseCompleteRule(t *testing.T) {
	good := []struct {
		in   string
		want CompleteRule
	}{
		{"next", CompleteRule{Kind: RuleNext}},
		{"rename", CompleteRule{Kind: RuleRename}},
		{"pointer", CompleteRule{Kind: RulePointer}},
		{"pointer:latest", CompleteRule{Kind: RulePointer, Marker: "latest"}},
		{"marker:COMPLETE", CompleteRule{Kind: RuleMarker, Marker: "COMPLETE"}},
		{"marker:.metadata", CompleteRule{Kind: RuleMarker, Marker: ".metadata"}},
		{"marker:a:b", CompleteRule{Kind: RuleMarker, Marker: "a:b"}},
		{"idle:30s", CompleteRule{Kind: RuleIdle, Idle: 30 * time.Second}},
		{"idle:1m30s", CompleteRule{Kind: RuleIdle, Idle: 90 * time.Second}},
	}
	for _, tc := range good {
		got, err := ParseCompleteRule(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseCompleteRule(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		back, err := ParseCompleteRule(got.String())
		if err != nil || back != got {
			t.Errorf("String round trip of %q: %q gave %+v, %v", tc.in, got.String(), back, err)
		}
	}
	for _, bad := range []string{
		"", "Next", "next:", "next:x", "rename:x", "marker", "marker:", "marker:a/b", "marker:.",
		"marker:..", "marker: COMPLETE", "marker:x\x00", "idle", "idle:", "idle:0s", "idle:-1s",
		"idle:30", "done", "pointer:", "pointer:a/b",
	} {
		if got, err := ParseCompleteRule(bad); err == nil {
			t.Errorf("ParseCompleteRule(%q) = %+v, want error", bad, got)
		}
	}
}

func TestCompleteRulesDuplicates(t *testing.T) {
	for _, tc := range []struct {
		list []string
		ok   bool
	}{
		{nil, true},
		{[]string{}, true},
		{[]string{"next", "marker:COMPLETE", "marker:.metadata", "rename", "idle:1m"}, true},
		{[]string{"next", "next"}, false},
		{[]string{"marker:A", "marker:A"}, false},
		{[]string{"idle:1m", "idle:2m"}, false},
		{[]string{"rename", "next", "rename"}, false},
	} {
		c := Default()
		c.Datasets.Complete = tc.list
		err := c.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("complete = %q: Validate() = %v, want ok=%v", tc.list, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "datasets.complete") {
			t.Errorf("error does not name the key: %v", err)
		}
		if rules := c.CompleteRules(); tc.ok && len(rules) != len(tc.list) {
			t.Errorf("CompleteRules() = %v for %q", rules, tc.list)
		}
	}
}

func TestDefaultCompleteRules(t *testing.T) {
	got := Default().CompleteRules()
	want := []CompleteRule{{Kind: RuleNext}, {Kind: RuleMarker, Marker: "COMPLETE"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("CompleteRules() = %+v, want %+v", got, want)
	}
	c := Default()
	c.Datasets.Complete = []string{"bogus"}
	if got := c.CompleteRules(); got != nil {
		t.Errorf("CompleteRules() of an invalid list = %+v, want nil", got)
	}
}

func TestMatchRegexp(t *testing.T) {
	for _, tc := range []struct {
		expr, path, want string // want "" = no match
	}{
		// The default: every top-level directory is a dataset.
		{`^(?P<dataset>[^/]+)/`, "ckpt.000100/", "ckpt.000100"},
		{`^(?P<dataset>[^/]+)/`, "ckpt.000100/rank_12.bin", "ckpt.000100"},
		{`^(?P<dataset>[^/]+)/`, "ckpt.000100/sub/rank_12.bin", "ckpt.000100"},
		{`^(?P<dataset>[^/]+)/`, "loose-file.bin", ""},
		// The flat layout from the documentation.
		{`^ckpt/step_(?P<dataset>\d+)_rank_\d+\.bin$`, "ckpt/step_100_rank_3.bin", "100"},
		{`^ckpt/step_(?P<dataset>\d+)_rank_\d+\.bin$`, "ckpt/", ""},
	} {
		c := Default()
		c.Datasets.Match = tc.expr
		re := c.MatchRegexp()
		if re == nil {
			t.Fatalf("MatchRegexp() = nil for %q", tc.expr)
		}
		got := ""
		if m := re.FindStringSubmatch(tc.path); m != nil {
			got = m[re.SubexpIndex("dataset")]
		}
		if got != tc.want {
			t.Errorf("%q on %q: dataset %q, want %q", tc.expr, tc.path, got, tc.want)
		}
	}
	c := Default()
	c.Datasets.Match = `^ckpt_(\d+)`
	if c.MatchRegexp() != nil {
		t.Error("MatchRegexp() without a dataset group is not nil")
	}
}
