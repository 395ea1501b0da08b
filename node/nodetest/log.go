package nodetest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
)

// logHandler writes a node's log records to the test log under -v only.
type logHandler struct {
	t     testing.TB
	node  int
	attrs []slog.Attr
}

func (h logHandler) Enabled(context.Context, slog.Level) bool { return testing.Verbose() }

func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	line := fmt.Sprintf("node %d %s %s", h.node, r.Level, r.Message)
	for _, a := range h.attrs {
		line += " " + a.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	h.t.Log(line)
	return nil
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}

func (h logHandler) WithGroup(string) slog.Handler { return h }
