package job

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// ErrExited says the daemon whose log was awaited is gone.
var ErrExited = errors.New("daemon exited")

// Log collects one daemon's log and lets the driver wait for an event.
type Log struct {
	name string    // prefix for echoed lines, e.g. "node 2"
	echo io.Writer // WARN and ERROR lines are copied here when not nil

	done chan struct{} // closed when the log reached EOF (the daemon is gone); see Done

	mu      sync.Mutex
	events  []Event
	raw     []string      // every line, for the tail shown on failure
	changed chan struct{} // closed and replaced whenever a line arrives
}

// NewLog returns a Log that copies warnings and errors to echo, when not
// nil, prefixed with name.
func NewLog(name string, echo io.Writer) *Log {
	return &Log{name: name, echo: echo, done: make(chan struct{}), changed: make(chan struct{})}
}

// Consume reads r until EOF; it runs on its own goroutine for the daemon's
// lifetime.
func (w *Log) Consume(r io.Reader) {
	defer close(w.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ev, ok := ParseEvent(sc.Bytes())
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

// Wait returns the first event (from the start of the log) that match
// accepts, blocking until one arrives, the log ends (the daemon exited) or
// ctx ends. fail, when not nil, ends the wait with an error as soon as an
// event it accepts is seen (a dataset reported degraded, say).
func (w *Log) Wait(ctx context.Context, match, fail func(Event) bool) (Event, error) {
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
				return Event{}, fmt.Errorf("%s: %w", w.name, ErrExited)
			}
		case <-ctx.Done():
			return Event{}, fmt.Errorf("%s: %w", w.name, context.Cause(ctx))
		}
	}
}

// All returns the events match accepts, in log order.
func (w *Log) All(match func(Event) bool) []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Event
	for _, ev := range w.events {
		if match(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// Tail returns the last n raw lines.
func (w *Log) Tail(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.raw[max(0, len(w.raw)-n):], "\n")
}

// Done is closed when the log reached its end: the daemon is gone.
func (w *Log) Done() <-chan struct{} { return w.done }
