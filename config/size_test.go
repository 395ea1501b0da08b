package config

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"4096", 4096},
		{" 4096 ", 4096},
		{"1B", 1},
		{"512KiB", 512 << 10},
		{"512kib", 512 << 10},
		{"4K", 4 << 10},
		{"1MiB", 1 << 20},
		{"1M", 1 << 20},
		{"1 MiB", 1 << 20},
		{"1.5GiB", 3 << 29},
		{"1.5G", 3 << 29},
		{"2TiB", 2 << 40},
		{"2T", 2 << 40},
		{"500MB", 500_000_000},
		{"1KB", 1000},
		{"1.5KB", 1500},
		{"3GB", 3_000_000_000},
		{"1TB", 1_000_000_000_000},
		{"0.5KiB", 512},
		{"1.000KiB", 1024},
		{"8388607TiB", 8388607 << 40},
		{"9223372036854775807", 9223372036854775807},
	}
	for _, tc := range good {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, wantErr string }{
		{"", "want bytes"},
		{"   ", "want bytes"},
		{"-1", "negative"},
		{"-1KiB", "negative"},
		{"+1", "want bytes"},
		{"1.", "want bytes"},
		{".5K", "want bytes"},
		{"1x", `unknown unit "x"`},
		{"1 PiB", "unknown unit"},
		{"1e3", "unknown unit"},
		{"0x10", "unknown unit"},
		{"1.3B", "whole number"},
		{"0.1KiB", "whole number"},
		{"8388608TiB", "too large"},
		{"9223372036854775808", "too large"},
		{"1KiB 2", "unknown unit"},
	}
	for _, tc := range bad {
		got, err := ParseSize(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseSize(%q) = %d, %v; want error containing %q", tc.in, got, err, tc.wantErr)
		}
	}
}

func TestSizeString(t *testing.T) {
	for _, tc := range []struct {
		in   Size
		want string
	}{
		{0, "0"},
		{1, "1"},
		{4095, "4095"},
		{4096, "4KiB"},
		{1536, "1536"},
		{1 << 20, "1MiB"},
		{3 << 29, "1536MiB"},
		{1 << 40, "1TiB"},
		{1000, "1KB"},
		{500_000_000, "500MB"},
		{1_024_000, "1000KiB"}, // 1000KiB beats 1024KB
		{2_000_000_000_000, "2TB"},
		{-5, "-5"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(tc.in), got, tc.want)
		}
	}
}

func TestSizeRoundTrip(t *testing.T) {
	vals := []Size{0, 1, 999, 1000, 1023, 1024, 4096, 1 << 20, 1_500_000, 3 << 29, 1<<40 + 1, 1<<63 - 1}
	for _, v := range vals {
		text, err := v.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Size
		if err := back.UnmarshalText(text); err != nil || back != v {
			t.Errorf("round trip of %d via %q gave %d, %v", int64(v), text, int64(back), err)
		}
	}
}

func TestSizeUnmarshalTOML(t *testing.T) {
	var s Size
	if err := s.UnmarshalTOML(int64(8192)); err != nil || s != 8192 {
		t.Errorf("int64: got %d, %v", s, err)
	}
	if err := s.UnmarshalTOML("2MiB"); err != nil || s != 2<<20 {
		t.Errorf("string: got %d, %v", s, err)
	}
	for _, bad := range []any{int64(-1), 1.5, true, []any{"1"}} {
		if err := s.UnmarshalTOML(bad); err == nil {
			t.Errorf("UnmarshalTOML(%#v) succeeded", bad)
		}
	}
}
