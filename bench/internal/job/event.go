package job

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// Event is one line of a daemon's JSON log (log.format = "json"): slog's
// time, level and msg, and the remaining attributes.
type Event struct {
	Time  time.Time
	Level string
	Msg   string
	Attrs map[string]any
}

// ParseEvent decodes one log line. Lines that are not slog JSON records
// (go-fuse or the runtime may print plain text) are reported as !ok, never
// as an error: a daemon's output is not ours to trust.
func ParseEvent(line []byte) (Event, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Event{}, false
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return Event{}, false
	}
	ts, _ := m["time"].(string)
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return Event{}, false
	}
	msg, _ := m["msg"].(string)
	level, _ := m["level"].(string)
	delete(m, "time")
	delete(m, "msg")
	delete(m, "level")
	return Event{Time: t, Level: level, Msg: msg, Attrs: m}, true
}

// Str returns a string attribute, or "" when absent or not a string.
func (e Event) Str(key string) string {
	s, _ := e.Attrs[key].(string)
	return s
}

// Num returns a numeric attribute, or 0 when absent or not a number.
func (e Event) Num(key string) float64 {
	f, _ := e.Attrs[key].(float64)
	return f
}

// Flag returns a boolean attribute, false when absent.
func (e Event) Flag(key string) bool {
	b, _ := e.Attrs[key].(bool)
	return b
}

// Is reports whether the event has message msg and, if dataset is not
// empty, the attribute dataset=dataset.
func (e Event) Is(msg, dataset string) bool {
	return e.Msg == msg && (dataset == "" || e.Str("dataset") == dataset)
}

// IsEvent matches a message about dataset ds.
func IsEvent(msg, ds string) func(Event) bool {
	return func(e Event) bool { return e.Is(msg, ds) }
}

// OutcomeOf matches the lines that mean dataset ds will not be protected or
// rebuilt as a benchmark needs: degraded, failed, or a failed rebuild.
func OutcomeOf(ds string) func(Event) bool {
	return func(e Event) bool {
		if e.Str("dataset") != ds {
			return false
		}
		return strings.HasPrefix(e.Msg, "dataset degraded") || e.Msg == "dataset failed" || e.Msg == "rebuild failed"
	}
}
