package e2e

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestFullCacheENOSPC puts the cache on a 16 MiB tmpfs: a writer that fills
// it gets ENOSPC (no hang, no crash), and the daemon keeps serving.
func TestFullCacheENOSPC(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs for the cache needs root")
	}
	for _, pt := range []string{"off", "auto"} {
		t.Run("passthrough="+pt, func(t *testing.T) {
			n := NewNode(t, "SCRFS_FUSE_PASSTHROUGH="+pt)
			if err := os.MkdirAll(n.Cache, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mount("tmpfs", n.Cache, "tmpfs", 0, "size=16m"); err != nil {
				t.Skipf("cannot mount a tmpfs: %v", err)
			}
			t.Cleanup(func() { syscall.Unmount(n.Cache, syscall.MNT_DETACH) })
			n.Start()

			writeRandom(t, n.Path("c", "small"), 4096, 1)
			f, err := os.Create(n.Path("c", "huge"))
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 1<<20)
			var werr error
			for i := 0; i < 64 && werr == nil; i++ {
				_, werr = f.Write(buf)
			}
			if werr == nil {
				werr = f.Sync()
			}
			f.Close()
			if !errors.Is(werr, syscall.ENOSPC) {
				t.Fatalf("writing 64 MiB into a 16 MiB cache: %v, want ENOSPC", werr)
			}
			// The daemon still answers, the other file is intact, and space
			// freed by the application is usable again.
			if ds := n.Dataset("c"); ds == nil || ds.State != "writing" {
				t.Fatalf("dataset after ENOSPC: %+v", ds)
			}
			if got, want := fileSum(t, n.Path("c", "small")), fileSum(t, n.CacheDir("c", "small")); got != want {
				t.Fatal("small file damaged")
			}
			if err := os.Remove(n.Path("c", "huge")); err != nil {
				t.Fatal(err)
			}
			writeRandom(t, n.Path("c", "after"), 8<<20, 2)
			if _, errs, code := n.CLI("complete", "c"); code != 0 {
				t.Fatalf("complete after ENOSPC: %s", errs)
			}
			n.WaitCompleted(10*time.Second, "c")
		})
	}
}

// TestMetricsScrape scrapes /metrics and checks real values with the
// Prometheus text parser.
func TestMetricsScrape(t *testing.T) {
	n := NewNode(t, "SCRFS_METRICS_LISTEN=127.0.0.1:0", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE").Start()
	writeRandom(t, n.Path("ckpt.1", "a"), 3<<20, 1)
	writeRandom(t, n.Path("ckpt.1", "b"), 1<<20, 2)
	must(t, os.WriteFile(n.Path("ckpt.1", "COMPLETE"), nil, 0o644))
	n.WaitCompleted(10*time.Second, "ckpt.1")
	writeRandom(t, n.Path("ckpt.2", "a"), 1000, 3)
	if err := os.WriteFile(n.Path("stray"), make([]byte, 1<<20+1), 0o644); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("a pointer file at the root past 1 MiB: %v, want EFBIG (counted as an error)", err)
	}

	addr := n.Status().Node.Metrics
	if addr == "" {
		t.Fatal("status shows no metrics address")
	}
	families := scrape(t, "http://"+addr+"/metrics")

	gauge := func(name string, labels ...string) float64 {
		return value(t, families, name, labels...)
	}
	if v := gauge("scrfs_datasets", "state", "complete"); v != 1 {
		t.Errorf("scrfs_datasets{state=complete} = %v, want 1", v)
	}
	if v := gauge("scrfs_datasets", "state", "writing"); v != 1 {
		t.Errorf("scrfs_datasets{state=writing} = %v, want 1", v)
	}
	if v := gauge("scrfs_dataset_written_bytes_total"); v < 4<<20+1000 {
		t.Errorf("scrfs_dataset_written_bytes_total = %v, want >= %d", v, 4<<20+1000)
	}
	if v := gauge("scrfs_cache_used_bytes"); v != 4<<20+1000 {
		t.Errorf("scrfs_cache_used_bytes = %v, want %d", v, 4<<20+1000)
	}
	if v := gauge("scrfs_cache_capacity_bytes"); v <= 0 {
		t.Errorf("scrfs_cache_capacity_bytes = %v", v)
	}
	if v := gauge("scrfs_fuse_ops_total", "op", "create"); v < 4 {
		t.Errorf("scrfs_fuse_ops_total{op=create} = %v, want >= 4", v)
	}
	// The kernel may send the write past the bound as more than one
	// request (it retries what remains of a short write).
	if v := gauge("scrfs_fuse_errors_total", "op", "write", "errno", "EFBIG"); v < 1 {
		t.Errorf("scrfs_fuse_errors_total{op=write,errno=EFBIG} = %v, want at least 1", v)
	}
	if v := gauge("scrfs_fuse_created_files_total"); v < 4 {
		t.Errorf("scrfs_fuse_created_files_total = %v", v)
	}
	h := families["scrfs_dataset_completion_duration_seconds"]
	if h == nil || h.Metric[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("completion duration histogram: %v", h)
	}
	if h := families["scrfs_fuse_op_duration_seconds"]; h == nil {
		t.Error("no FUSE latency histogram")
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return families
}

// value returns the value of the series of family name whose labels match
// the given name/value pairs.
func value(t *testing.T, families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	fam := families[name]
	if fam == nil {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range fam.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}
