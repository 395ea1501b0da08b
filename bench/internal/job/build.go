package job

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Build compiles cmd/scrfs into dir. The package path (not ./cmd/scrfs)
// works from any directory inside the module; outside it, benchmarks take
// a -bin flag.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "scrfs")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/scrfs/scrfs/cmd/scrfs").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build scrfs (run inside the module, or give -bin): %w\n%s", err, out)
	}
	return bin, nil
}

// ParseSize parses "1GiB", "256MiB", "64KiB" or a plain number of bytes.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	if n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q out of range", s)
	}
	return n * mult, nil
}

// Median returns the middle of the samples (the upper middle of an even
// count); 0 for none.
func Median[T int64 | float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
