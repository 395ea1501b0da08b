package redundancy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRebuildGauges: the rebuilds under way show as datasets and the
// bytes they have still to handle, read when scraped.
func TestRebuildGauges(t *testing.T) {
	var under []Progress
	reg := prometheus.NewRegistry()
	newMetrics(reg, func() []Progress { return under })
	check := func(datasets, left float64) {
		t.Helper()
		for name, want := range map[string]float64{"scrfs_rebuild_datasets": datasets, "scrfs_rebuild_remaining_bytes": left} {
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range fams {
				if f.GetName() == name {
					found = true
					if got := f.GetMetric()[0].GetGauge().GetValue(); got != want {
						t.Errorf("%s = %v, want %v", name, got, want)
					}
				}
			}
			if !found {
				t.Errorf("no %s", name)
			}
		}
	}
	check(0, 0)
	under = []Progress{{Done: 100, Total: 1000}, {Done: 0, Total: 0}}
	check(2, 900)
	if n := testutil.CollectAndCount(reg, "scrfs_rebuild_datasets", "scrfs_rebuild_remaining_bytes"); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
}
