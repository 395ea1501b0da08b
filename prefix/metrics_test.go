package prefix

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	must(t, err)
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering twice succeeded")
	}
	src := filepath.Join(fastDir(t), "ckpt.1")
	writeFile(t, filepath.Join(src, "a"), 3000, 1)
	writeFile(t, filepath.Join(src, "d/b"), 5000, 2)
	prefix := filepath.Join(fastDir(t), "ckpt.1")
	o := Options{CRC: true, Metrics: m, Limiter: NewLimiter(1 << 30)}
	es, err := dirFlush(context.Background(), src, prefix, 0, listed(t, src), o)
	must(t, err)
	if got := testutil.ToFloat64(m.bytes.WithLabelValues("flush")); got != 8000 {
		t.Errorf("flush bytes %v", got)
	}
	if got := testutil.ToFloat64(m.files.WithLabelValues("flush")); got != 2 {
		t.Errorf("flush files %v", got)
	}
	must(t, os.Truncate(filepath.Join(prefix, "a"), 10))
	if err := dirFetch(context.Background(), prefix, filepath.Join(fastDir(t), "ckpt.1"), es, o); err == nil {
		t.Fatal("fetch of a truncated file succeeded")
	}
	if got := testutil.ToFloat64(m.failures.WithLabelValues("fetch", "corrupt")); got != 1 {
		t.Errorf("corrupt fetch failures %v", got)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n < 5 {
		t.Errorf("gathered %d series: %v", n, err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	var nilM *Metrics // recording into nil is a no-op
	nilM.observe("flush", 1, 1, 0, nil)
	nilM.throttled(1)
}
