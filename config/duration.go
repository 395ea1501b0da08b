package config

import (
	"fmt"
	"strings"
	"time"
)

// Duration is a time.Duration written in files and environment variables as a
// Go duration string ("30s", "1h30m", "250ms"). Bare TOML integers are
// refused: "60" could mean seconds or nanoseconds, and guessing wrong is worse
// than asking.
type Duration struct {
	time.Duration
}

// durationSyntax is appended to parse errors so the user sees what is allowed.
const durationSyntax = `want a duration string like "30s", "1h30m" or "250ms" (units ns, us, ms, s, m, h)`

// String returns d in time.Duration's notation without zero trailing
// components: "1m" rather than "1m0s", "1h30m" rather than "1h30m0s".
func (d Duration) String() string {
	s := d.Duration.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalText implements encoding.TextMarshaler with String's form.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with time.ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("invalid duration %q: %s", b, durationSyntax)
	}
	d.Duration = v
	return nil
}

// UnmarshalTOML implements toml.Unmarshaler; only TOML strings are accepted.
func (d *Duration) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("expected a duration, got %s: %s", tomlTypeName(v), durationSyntax)
	}
	return d.UnmarshalText([]byte(s))
}
