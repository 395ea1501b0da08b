package job

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MetricsOn is the setting that makes every daemon serve its Prometheus
// metrics on a port of its own choosing; Node.Metrics finds it.
const MetricsOn = "SCRFS_METRICS_LISTEN=127.0.0.1:0"

// Metrics are the series of one scrape, by name: each series' labels and
// value (counters, gauges and untyped only).
type Metrics map[string][]Series

// Series is one labelled value.
type Series struct {
	Labels map[string]string
	Value  float64
}

// Metrics scrapes node n's daemon, which must run with MetricsOn: the
// address comes from its "metrics endpoint listening" log line.
func (n *Node) Metrics(ctx context.Context) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ev, err := n.log.Wait(ctx, IsEvent("metrics endpoint listening", ""), nil)
	if err != nil {
		return nil, fmt.Errorf("node %d serves no metrics (run it with %s): %w", n.Index, MetricsOn, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ev.Str("addr")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape node %d: %w", n.Index, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape node %d: %s", n.Index, resp.Status)
	}
	m, err := ParseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape node %d: %w", n.Index, err)
	}
	return m, nil
}

// ParseMetrics reads a Prometheus text exposition.
func ParseMetrics(r io.Reader) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse exposition: %w", err)
	}
	out := Metrics{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			s := Series{Labels: map[string]string{}}
			for _, lp := range m.GetLabel() {
				s.Labels[lp.GetName()] = lp.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.Value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.Value = m.GetGauge().GetValue()
			case m.Untyped != nil:
				s.Value = m.GetUntyped().GetValue()
			default:
				continue // histograms and summaries: not needed here
			}
			out[name] = append(out[name], s)
		}
	}
	return out, nil
}

// Sum returns the sum of the series of name whose labels include every
// name=value pair of labels (given as name, value, name, value, …); 0 when
// none does.
func (m Metrics) Sum(name string, labels ...string) float64 {
	var sum float64
next:
	for _, s := range m[name] {
		for i := 0; i+1 < len(labels); i += 2 {
			if s.Labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		sum += s.Value
	}
	return sum
}

// By returns the sums of the series of name by the value of label, for the
// series whose labels include the pairs of labels (as Sum).
func (m Metrics) By(name, label string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, v := range m.values(name, label) {
		out[v] = m.Sum(name, append([]string{label, v}, labels...)...)
	}
	return out
}

// values returns the distinct values label takes in the series of name,
// sorted.
func (m Metrics) values(name, label string) []string {
	seen := map[string]bool{}
	for _, s := range m[name] {
		if v, ok := s.Labels[label]; ok {
			seen[v] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Diff returns b − a for every key of b (a key missing from a counts as 0):
// what counters increased by between two scrapes grouped with By.
func Diff(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// FormatTop returns the n largest entries of m as "key value" pairs,
// largest first (ties by key), e.g. "share 4, record 4".
func FormatTop(m map[string]float64, n int, scale float64) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %.3g", k, m[k]*scale))
	}
	return strings.Join(parts, ", ")
}
