package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// docs/grafana/scrfs.json is checked twice: its structure here without
// daemons (TestDashboardJSON), and every expression against a real
// Prometheus scraping a job that protected and flushed a checkpoint
// (checkDashboardLive, from TestPrometheus).

const dashboardPath = "../docs/grafana/scrfs.json"

// gPanel is the part of a Grafana panel the tests read.
type gPanel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []gPanel `json:"panels"` // a collapsed row's panels
}

type gDashboard struct {
	Title      string   `json:"title"`
	UID        string   `json:"uid"`
	Schema     int      `json:"schemaVersion"`
	Panels     []gPanel `json:"panels"`
	Templating struct {
		List []struct {
			Type       string `json:"type"`
			Name       string `json:"name"`
			Query      any    `json:"query"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T) *gDashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d gDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return &d
}

// allPanels flattens rows.
func (d *gDashboard) allPanels() []gPanel {
	var out []gPanel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// requiredPanels are the panels issue 6 asks for, and issue 26's
// rebuilds in progress, by title.
var requiredPanels = []string{
	"Write bandwidth per node", "Read bandwidth per node", "Datasets by state",
	"Newest flushed checkpoint age", "Encode duration by scheme", "Encode throughput by scheme",
	"Rebuild duration and throughput", "Rebuilds in progress", "Flush and fetch duration", "Flush and fetch throughput per node",
	"Peer link status", "Cache usage vs capacity per node", "FUSE latency by op (p99)", "Errors by errno",
}

// TestDashboardJSON checks that the dashboard is importable as is: the
// Prometheus data source is a variable every panel uses, panels do not
// overlap, and the panels the operators need are there.
func TestDashboardJSON(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" || d.Schema < 36 {
		t.Errorf("title %q uid %q schemaVersion %d", d.Title, d.UID, d.Schema)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "datasource" && v.Query != "prometheus" {
			t.Errorf("data source variable %s is for %v, want prometheus", v.Name, v.Query)
		}
	}
	if vars["datasource"] != "datasource" {
		t.Fatalf("no data source variable named datasource: %v", vars)
	}
	ids := map[int]string{}
	titles := map[string]bool{}
	// cells records which panel covers each grid cell, to find overlaps.
	cells := map[[2]int]string{}
	for _, p := range d.allPanels() {
		if prev, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		titles[p.Title] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, taken := cells[[2]int{x, y}]; taken {
					t.Fatalf("panels %q and %q overlap at %d,%d", p.Title, other, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the data source variable: %+v", p.Title, p.Datasource)
		}
		if p.Description == "" {
			t.Errorf("panel %q has no description", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target %+v", p.Title, tg)
			}
			refs[tg.RefID] = true
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
	for _, want := range requiredPanels {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}

// grafanaVars replaces the dashboard's variables by what Grafana would
// send with every job and node selected.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$window", "1h",
	`"$job_id"`, `".*"`,
	`"$node"`, `".*"`,
)

// quietPanels may show nothing for a healthy job: their counters have no
// series until a first event.
var quietPanels = map[string]bool{
	"Reconnects, refused and dropped connections": true,
}

// checkDashboardLive evaluates every expression of the dashboard on p: it
// must parse and run, refer only to metric names in exported (taken from
// the daemons' own expositions), and every panel but the quiet ones must
// show data for a job that protected and flushed a checkpoint.
func checkDashboardLive(t *testing.T, p *promServer, exported map[string]bool) {
	d := readDashboard(t)
	n := 0
	for _, pn := range d.allPanels() {
		if pn.Type == "row" {
			continue
		}
		data := false
		for _, tg := range pn.Targets {
			n++
			expr := grafanaVars.Replace(tg.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q: unknown variable in %s", pn.Title, expr)
				continue
			}
			checkNames(t, fmt.Sprintf("panel %q", pn.Title), expr, exported)
			v, err := p.query(t, expr)
			if err != nil {
				t.Errorf("panel %q: %s: %v", pn.Title, tg.Expr, err)
				continue
			}
			data = data || len(v) > 0
		}
		if !data && !quietPanels[pn.Title] {
			t.Errorf("panel %q shows no data for a job that protected and flushed a checkpoint", pn.Title)
		}
	}
	if n == 0 {
		t.Fatal("the dashboard has no expressions")
	}
	// Variable queries: label_values(SELECTOR, LABEL).
	re := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := re.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		sel := grafanaVars.Replace(m[1])
		checkNames(t, "variable "+v.Name, sel, exported)
		got := p.mustQuery(t, sel)
		if len(got) == 0 || got[0].Metric[m[2]] == "" {
			t.Errorf("variable %s: %s has no label %s: %v", v.Name, sel, m[2], got)
		}
	}
}

// checkNames fails the test for each metric name in expr that the daemons
// do not export.
func checkNames(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	names, err := promqlMetricNames(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if len(names) == 0 {
		t.Errorf("%s: no metric in %s", where, expr)
	}
	for _, name := range names {
		if !exported[name] {
			t.Errorf("%s: %s is not exported by scrfs (in %s)", where, name, expr)
		}
	}
}

// exportedNames returns the series names an exposition yields: a family's
// name, and for histograms and summaries their _bucket, _sum and _count.
func exportedNames(t *testing.T, families map[string]*dto.MetricFamily) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	if len(out) == 0 {
		t.Fatal("empty exposition")
	}
	return out
}
