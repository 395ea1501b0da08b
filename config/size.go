package config

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Size is a number of bytes. In files and environment variables it is written
// as an integer or as a string of a decimal number and a unit: "4096",
// "512KiB", "1.5GiB", "500MB". K, M, G, T and KiB, MiB, GiB, TiB are powers of
// 1024; KB, MB, GB, TB powers of 1000; B or no unit means bytes. Units are not
// case-sensitive. A fraction is allowed when the result is a whole number of
// bytes. Negative sizes do not parse.
type Size int64

// Common sizes.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

// sizeUnit is one unit a Size may be written with.
type sizeUnit struct {
	name  string
	bytes int64
}

// sizeUnits lists the units String may print. Binary units come first so
// that, of two equally short forms, the binary one wins.
var sizeUnits = [...]sizeUnit{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
}

// unitBytes maps a lower-cased unit to its size in bytes.
func unitBytes(unit string) (int64, bool) {
	switch strings.ToLower(unit) {
	case "", "b":
		return 1, true
	case "k", "kib":
		return 1 << 10, true
	case "m", "mib":
		return 1 << 20, true
	case "g", "gib":
		return 1 << 30, true
	case "t", "tib":
		return 1 << 40, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	case "tb":
		return 1e12, true
	}
	return 0, false
}

// sizeSyntax is appended to every parse error so the user sees what is allowed.
const sizeSyntax = `want bytes as an integer or a string like "4096", "512KiB", "1.5GiB", "500MB" ` +
	`(K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000)`

// ParseSize parses s as described on Size. Surrounding spaces and spaces
// between the number and the unit are allowed.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	// Split the number (digits, optionally '.' and more digits) from the unit.
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	whole := t[:i]
	frac := ""
	if i < len(t) && t[i] == '.' {
		j := i + 1
		for j < len(t) && t[j] >= '0' && t[j] <= '9' {
			j++
		}
		frac = t[i+1 : j]
		if frac == "" {
			return 0, fmt.Errorf("invalid size %q: %s", s, sizeSyntax)
		}
		i = j
	}
	if whole == "" {
		if strings.HasPrefix(t, "-") {
			return 0, fmt.Errorf("invalid size %q: must not be negative", s)
		}
		return 0, fmt.Errorf("invalid size %q: %s", s, sizeSyntax)
	}
	mult, ok := unitBytes(strings.TrimSpace(t[i:]))
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q: %s", s, strings.TrimSpace(t[i:]), sizeSyntax)
	}
	// Exact arithmetic: whole.frac * mult must be a whole number of bytes, and
	// big.Int keeps absurdly long inputs from overflowing silently.
	n, _ := new(big.Int).SetString(whole+frac, 10)
	n.Mul(n, big.NewInt(mult))
	div := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	q, r := new(big.Int).QuoRem(n, div, new(big.Int))
	if r.Sign() != 0 {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", s)
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("invalid size %q: too large (at most %d bytes)", s, int64(math.MaxInt64))
	}
	return Size(q.Int64()), nil
}

// String returns the shortest exact form of s: a whole number of the unit
// that leaves the smallest number ("1MiB", "500MB", "4095"). ParseSize of the
// result gives s back for every s >= 0.
func (s Size) String() string {
	if s <= 0 {
		return strconv.FormatInt(int64(s), 10)
	}
	best, unit := int64(s), ""
	for _, u := range sizeUnits {
		if int64(s)%u.bytes == 0 && int64(s)/u.bytes < best {
			best, unit = int64(s)/u.bytes, u.name
		}
	}
	return strconv.FormatInt(best, 10) + unit
}

// MarshalText implements encoding.TextMarshaler with String's form.
func (s Size) MarshalText() ([]byte, error) {
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseSize.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// UnmarshalTOML implements toml.Unmarshaler: a TOML integer is a number of
// bytes, a TOML string is parsed with ParseSize.
func (s *Size) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case int64:
		if v < 0 {
			return fmt.Errorf("invalid size %d: must not be negative", v)
		}
		*s = Size(v)
		return nil
	case string:
		return s.UnmarshalText([]byte(v))
	}
	return fmt.Errorf("expected a size, got %s: %s", tomlTypeName(v), sizeSyntax)
}
