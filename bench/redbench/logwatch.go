package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// errExited says the daemon whose log was awaited is gone.
var errExited = errors.New("daemon exited")

// event is one line of a daemon's JSON log (log.format = "json"): slog's
// time, level and msg, and the remaining attributes.
type event struct {
	Time  time.Time
	Level string
	Msg   string
	Attrs map[string]any
}

// parseEvent decodes one log line. Lines that are not slog JSON records
// (go-fuse or the runtime may print plain text) are reported as !ok, never
// as an error: a daemon's output is not ours to trust.
func parseEvent(line []byte) (event, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return event{}, false
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return event{}, false
	}
	ts, _ := m["time"].(string)
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return event{}, false
	}
	msg, _ := m["msg"].(string)
	level, _ := m["level"].(string)
	delete(m, "time")
	delete(m, "msg")
	delete(m, "level")
	return event{Time: t, Level: level, Msg: msg, Attrs: m}, true
}

// str returns a string attribute, or "" when absent or not a string.
func (e event) str(key string) string {
	s, _ := e.Attrs[key].(string)
	return s
}

// num returns a numeric attribute, or 0 when absent or not a number.
func (e event) num(key string) float64 {
	f, _ := e.Attrs[key].(float64)
	return f
}

// flag returns a boolean attribute, false when absent.
func (e event) flag(key string) bool {
	b, _ := e.Attrs[key].(bool)
	return b
}

// is reports whether the event has message msg and, if dataset is not
// empty, the attribute dataset=dataset.
func (e event) is(msg, dataset string) bool {
	return e.Msg == msg && (dataset == "" || e.str("dataset") == dataset)
}

// logWatch collects one daemon's log and lets the driver wait for an event.
type logWatch struct {
	name string    // prefix for echoed lines, e.g. "node 2"
	echo io.Writer // WARN and ERROR lines are copied here when not nil

	done chan struct{} // closed when the log reached EOF (the daemon is gone)

	mu      sync.Mutex
	events  []event
	raw     []string      // every line, for the tail shown on failure
	changed chan struct{} // closed and replaced whenever a line arrives
}

func newLogWatch(name string, echo io.Writer) *logWatch {
	return &logWatch{name: name, echo: echo, done: make(chan struct{}), changed: make(chan struct{})}
}

// consume reads r until EOF; it runs on its own goroutine for the daemon's
// lifetime.
func (w *logWatch) consume(r io.Reader) {
	defer close(w.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ev, ok := parseEvent(sc.Bytes())
		w.mu.Lock()
		w.raw = append(w.raw, sc.Text())
		if ok {
			w.events = append(w.events, ev)
		}
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
		if w.echo != nil && (!ok || ev.Level == "WARN" || ev.Level == "ERROR") {
			fmt.Fprintf(w.echo, "  [%s] %s\n", w.name, sc.Text())
		}
	}
}

// wait returns the first event (from the start of the log) that match
// accepts, blocking until one arrives, the log ends (the daemon exited) or
// ctx ends. fail, when not nil, ends the wait with an error as soon as an
// event it accepts is seen (a dataset reported degraded, say).
func (w *logWatch) wait(ctx context.Context, match, fail func(event) bool) (event, error) {
	seen := 0
	for {
		w.mu.Lock()
		for ; seen < len(w.events); seen++ {
			ev := w.events[seen]
			if fail != nil && fail(ev) {
				w.mu.Unlock()
				return ev, fmt.Errorf("%s: %s %v", w.name, ev.Msg, ev.Attrs)
			}
			if match(ev) {
				w.mu.Unlock()
				return ev, nil
			}
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-w.done:
			// Every line is in; one more pass sees the last of them.
			w.mu.Lock()
			drained := seen == len(w.events)
			w.mu.Unlock()
			if drained {
				return event{}, fmt.Errorf("%s: %w", w.name, errExited)
			}
		case <-ctx.Done():
			return event{}, fmt.Errorf("%s: %w", w.name, context.Cause(ctx))
		}
	}
}

// all returns the events match accepts, in log order.
func (w *logWatch) all(match func(event) bool) []event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []event
	for _, ev := range w.events {
		if match(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// tail returns the last n raw lines.
func (w *logWatch) tail(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.raw[max(0, len(w.raw)-n):], "\n")
}
