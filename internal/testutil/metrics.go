package testutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric returns the value of the first counter or gauge series called
// name that g gathers and whose labels match accepts, and whether there
// is one (a labelled series is exported only once it has been set).
func Metric(t testing.TB, g prometheus.Gatherer, name string, match func(labels map[string]string) bool) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if !match(labels) {
				continue
			}
			if m.Gauge != nil {
				return m.Gauge.GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// Counter returns the value of series name{want} that g gathers, 0 if it
// does not exist.
func Counter(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	v, _ := Metric(t, g, name, func(labels map[string]string) bool {
		for k, v := range want {
			if labels[k] != v {
				return false
			}
		}
		return true
	})
	return v
}
