package config

import (
	"testing"
	"time"
)

func TestDurationText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		text string
	}{
		{"30s", 30 * time.Second, "30s"},
		{"60s", time.Minute, "1m"},
		{"120s", 2 * time.Minute, "2m"},
		{"1h30m", 90 * time.Minute, "1h30m"},
		{"1h", time.Hour, "1h"},
		{"1h0m1s", time.Hour + time.Second, "1h0m1s"},
		{"250ms", 250 * time.Millisecond, "250ms"},
		{"1.5s", 1500 * time.Millisecond, "1.5s"},
		{"0", 0, "0s"},
		{" 2s ", 2 * time.Second, "2s"},
		{"-1m", -time.Minute, "-1m"},
	} {
		var d Duration
		if err := d.UnmarshalText([]byte(tc.in)); err != nil || d.Duration != tc.want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", tc.in, d.Duration, err, tc.want)
			continue
		}
		text, _ := d.MarshalText()
		if string(text) != tc.text {
			t.Errorf("MarshalText(%v) = %q, want %q", tc.want, text, tc.text)
		}
		var back Duration
		if err := back.UnmarshalText(text); err != nil || back != d {
			t.Errorf("round trip of %q gave %v, %v", text, back, err)
		}
	}
	for _, bad := range []string{"", "30", "ten", "1x", "s"} {
		var d Duration
		if err := d.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) succeeded: %v", bad, d)
		}
	}
}

func TestDurationUnmarshalTOML(t *testing.T) {
	var d Duration
	if err := d.UnmarshalTOML("45s"); err != nil || d.Duration != 45*time.Second {
		t.Errorf("string: got %v, %v", d, err)
	}
	// A bare integer is ambiguous (seconds? nanoseconds?) and refused.
	for _, bad := range []any{int64(60), 1.5, true} {
		if err := d.UnmarshalTOML(bad); err == nil {
			t.Errorf("UnmarshalTOML(%#v) succeeded", bad)
		}
	}
}
