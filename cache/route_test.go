package cache

import (
	"errors"
	"regexp"
	"testing"
)

func mustRouter(t *testing.T, expr string) *Router {
	t.Helper()
	r, err := NewRouter(regexp.MustCompile(expr))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRoute(t *testing.T) {
	const def = `^(?P<dataset>[^/]+)/`
	const flat = `^ckpt/step_(?P<dataset>\d+)_rank_\d+\.bin$`
	const nested = `^run1/(?P<dataset>ckpt\.\d+)/`
	tests := []struct {
		expr, path string
		dir        bool
		want       Route
		err        error
	}{
		{def, "ckpt.100", true, Route{"ckpt.100", KindDir, "ckpt.100"}, nil},
		{def, "file.bin", false, Route{}, ErrNoDataset},
		{def, ".scrfs", true, Route{}, ErrNoDataset},
		{flat, "ckpt", true, Route{}, ErrNoDataset},
		{flat, "ckpt/step_100_rank_3.bin", false, Route{"100", KindFlat, "ckpt"}, nil},
		{flat, "ckpt/step_x_rank_3.bin", false, Route{}, ErrNoDataset},
		{flat, "ckpt/other.txt", false, Route{}, ErrNoDataset},
		{nested, "run1", true, Route{}, ErrNoDataset},
		{nested, "run1/ckpt.5", true, Route{"ckpt.5", KindDir, "run1/ckpt.5"}, nil},
		{nested, "run1/ckpt.5x", true, Route{}, ErrNoDataset},
		// The group covers only part of a directory's name: a namespace dir.
		{`^(?P<dataset>ckpt)\.\d+/`, "ckpt.1", true, Route{}, ErrNoDataset},
		// A file whose whole name is the dataset is a flat dataset of one file.
		{`^(?P<dataset>[^/]+\.h5)$`, "state.h5", false, Route{"state.h5", KindFlat, ""}, nil},
	}
	for _, tt := range tests {
		got, err := mustRouter(t, tt.expr).Route(tt.path, tt.dir)
		if !errors.Is(err, tt.err) || (err == nil && got != tt.want) {
			t.Errorf("Route(%q, %q, dir=%v) = %+v, %v; want %+v, %v", tt.expr, tt.path, tt.dir, got, err, tt.want, tt.err)
		}
	}
}

func TestRouterNeedsDatasetGroup(t *testing.T) {
	if _, err := NewRouter(regexp.MustCompile(`^([^/]+)/`)); err == nil {
		t.Fatal("router without a dataset group accepted")
	}
}
