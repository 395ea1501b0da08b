package job

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// FormatBytes prints a byte count in the largest binary unit that keeps it
// ≥ 1, e.g. "1.5 GiB".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return trimZero(fmt.Sprintf("%.2f", float64(n)/(1<<30))) + " GiB"
	case n >= 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
	case n >= 1<<10:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KiB"
	}
	return fmt.Sprintf("%d B", n)
}

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// FormatRate prints n bytes in d as GiB/s, "–" for no time.
func FormatRate(n int64, d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f GiB/s", float64(n)/(1<<30)/d.Seconds())
}

// FormatSpread prints the median and the range of the samples in seconds,
// e.g. "1.20 s [1.10–1.42]"; "–" for none.
func FormatSpread(v []time.Duration) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f s [%.2f–%.2f]", Median(v).Seconds(), slices.Min(v).Seconds(), slices.Max(v).Seconds())
}
