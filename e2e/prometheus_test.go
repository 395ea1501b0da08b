package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/peer"
)

// The operator's view, tested with the operator's tools: a real Prometheus
// server scrapes running daemons, evaluates docs/prometheus/alerts.yml and
// answers every expression of docs/grafana/scrfs.json; promtool lints each
// daemon's exposition.

// observed is a small job in the states a dashboard must show: node 1 was
// restarted (a link reconnect on node 0), every node wrote its part of
// ckpt.1, which completed, was protected and flushed; the application hit an
// error; node 0 was sent garbage and a handshake with the wrong secret.
// failFlush adds a checkpoint whose flush fails.
type observed struct {
	c       *Cluster
	prefix  string
	written []int64  // bytes each node wrote into all checkpoints
	flushed []int64  // bytes each node flushed
	metrics []string // each node's metrics address
	start   time.Time
}

// newObserved starts a two-node job (XOR, the default for two nodes) with
// metrics on loopback and brings it to that state.
func newObserved(t *testing.T) *observed {
	t.Helper()
	o := &observed{start: time.Now(), prefix: t.TempDir()}
	o.c = NewCluster(t, 2, "SCRFS_METRICS_LISTEN=127.0.0.1:0", "SCRFS_PATHS_PREFIX="+o.prefix,
		"SCRFS_FLUSH_EVERY=0", "SCRFS_DATASETS_COMPLETE=marker:COMPLETE").Start()
	o.written, o.flushed = make([]int64, 2), make([]int64, 2)

	// A restart of node 1: node 0's link to it comes back up.
	if err := o.c.Nodes[1].Stop(); err != nil {
		t.Fatal(err)
	}
	o.c.Nodes[1].Start()
	n0 := o.c.Nodes[0]
	if _, ok := n0.log.waitNth(30*time.Second, n0.exited, 2, "link to node 1", "up"); !ok {
		t.Fatalf("node 0 did not log its link to node 1 up again:\n%s", n0.log.String())
	}

	o.checkpoint(t, "ckpt.1")
	if out, errs, code := o.c.Nodes[1].CLI("flush", "--wait", "ckpt.1"); code != 0 {
		t.Fatalf("scrfs flush --wait: exit %d: %s%s", code, out, errs)
	}
	o.c.WaitFlush(30*time.Second, "ckpt.1", "flushed")
	copy(o.flushed, o.written)
	// A pointer file at the root past 1 MiB: EFBIG, counted by errno.
	if err := os.WriteFile(o.c.Nodes[0].Path("stray"), make([]byte, 1<<20+1), 0o644); err == nil {
		t.Fatal("a pointer file past 1 MiB was accepted")
	}
	o.intrude(t)
	for i, n := range o.c.Nodes {
		addr := n.Status().Node.Metrics
		if addr == "" {
			t.Fatalf("node %d: status shows no metrics address", i)
		}
		o.metrics = append(o.metrics, addr)
	}
	return o
}

// checkpoint writes dataset name on every node and waits until it is
// protected everywhere.
func (o *observed) checkpoint(t *testing.T, name string) {
	t.Helper()
	for i, n := range o.c.Nodes {
		size := int64(1<<20 + 4096*(i+1) + len(name))
		writeRandom(t, n.Path(name, fmt.Sprintf("rank_%d.bin", i)), size, uint64(i+1))
		o.written[i] += size
	}
	if err := os.WriteFile(o.c.Nodes[0].Path(name, "COMPLETE"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o.c.WaitState(60*time.Second, name, "protected")
}

// intrude sends node 0's peer port garbage, then a handshake with the
// wrong secret, as a stray client or another job would.
func (o *observed) intrude(t *testing.T) {
	t.Helper()
	n0 := o.c.Nodes[0]
	conn, err := net.Dial("tcp", o.c.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("GET / HTTP/1.0\r\n\r\n this is not scrfs"))
	n0.WaitLog(10*time.Second, "dropped connection from", "before authentication")
	conn.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	intruder, err := peer.Start(ctx, peer.Config{
		Job: "e2e", Self: 1, Addrs: []string{o.c.Addrs[0], "127.0.0.1:0"},
		Secret: []byte("not-the-secret-of-this-job"), IOTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Close()
	refused := make(chan error, 1)
	go func() {
		_, err := intruder.Call(ctx, 0, "status", nil)
		refused <- err
	}()
	n0.WaitLog(10*time.Second, "authentication failed")
	cancel()
	if err := <-refused; err == nil {
		t.Fatal("node 0 answered a call from a node without the job secret")
	}
}

// failFlush writes and protects ckpt.2 and makes its flush fail: a file
// stands where its directory in the prefix must go.
func (o *observed) failFlush(t *testing.T) {
	t.Helper()
	o.checkpoint(t, "ckpt.2")
	if err := os.WriteFile(filepath.Join(o.prefix, "ckpt.2"), []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := o.c.Nodes[0].CLI("flush", "--wait", "ckpt.2"); code != 1 {
		t.Fatalf("flush of ckpt.2 into a file: exit %d, want 1: %s", code, errs)
	}
	o.c.WaitFlush(30*time.Second, "ckpt.2", "flush-failed")
}

// exposition returns node i's /metrics body.
func (o *observed) exposition(t *testing.T, i int) []byte {
	t.Helper()
	resp, err := http.Get("http://" + o.metrics[i] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics of node %d: %s %v", i, resp.Status, err)
	}
	return body
}

// TestPrometheus scrapes a running job with a real Prometheus server,
// which also evaluates docs/prometheus/alerts.yml and every expression of
// docs/grafana/scrfs.json.
func TestPrometheus(t *testing.T) {
	requireTool(t, "prometheus", "prometheus")
	promtool := requireTool(t, "promtool", "prometheus")
	o := newObserved(t)
	alerts, err := filepath.Abs(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	p := startPrometheus(t, o.metrics, []string{alerts})
	p.awaitQuery(t, 30*time.Second, `count(up{job="scrfs"} == 1)`, float64(len(o.metrics)))

	// A flush fails while Prometheus watches: the alert must fire.
	o.failFlush(t)
	p.awaitQuery(t, 30*time.Second, `count(ALERTS{alertname="ScrfsFlushFailing", alertstate="firing"})`, 1)
	// Both nodes' last state is scraped once both show ckpt.2 protected.
	p.awaitQuery(t, 30*time.Second, `count(scrfs_datasets{state="protected"} == 2)`, float64(len(o.metrics)))

	t.Run("series", func(t *testing.T) { o.checkSeries(t, p) })
	t.Run("promtool check metrics", func(t *testing.T) {
		for i := range o.metrics {
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = strings.NewReader(string(o.exposition(t, i)))
			out, err := cmd.CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Errorf("node %d: promtool check metrics: %v\n%s", i, err, out)
			}
		}
	})
	families := o.families(t)
	exported := exportedNames(t, families)
	t.Run("alert rules", func(t *testing.T) { checkRulesLive(t, p, exported) })
	t.Run("dashboard", func(t *testing.T) {
		// rate() needs two samples in its window: wait for three scrapes.
		p.awaitQuery(t, 30*time.Second, `count(count_over_time(scrfs_node_info[1m]) >= 3)`, float64(len(o.metrics)))
		checkDashboardLive(t, p, exported)
	})
	t.Run("metrics documented", func(t *testing.T) { checkMetricsDocumented(t, families) })
	t.Run("lifecycle logs", func(t *testing.T) { o.checkLifecycleLogs(t) })
}

// checkLifecycleLogs checks the timeline docs/guide.md promises: one line
// per step of ckpt.1's life on every node, in order, with the dataset's
// name and the bytes, seconds and (where data moves) rate of the step.
func (o *observed) checkLifecycleLogs(t *testing.T) {
	for i, n := range o.c.Nodes {
		size := fmt.Sprintf("bytes=%d", int64(1<<20+4096*(i+1)+len("ckpt.1")))
		steps := [][]string{
			{"dataset started", "dataset=ckpt.1"},
			{"dataset complete", "dataset=ckpt.1", size, "seconds="},
			{"dataset protected", "dataset=ckpt.1", "scheme=xor", size, "seconds=", "rate_mib_s="},
			{"dataset flushed", "dataset=ckpt.1", size, "seconds=", "rate_mib_s="},
		}
		n.log.mu.Lock()
		lines := slices.Clone(n.log.lines)
		n.log.mu.Unlock()
		next := 0
		for _, l := range lines {
			if next < len(steps) && containsAll(l, steps[next]) {
				next++
			}
		}
		if next < len(steps) {
			t.Errorf("node %d: no log line with %q after the earlier steps", i, steps[next])
		}
	}
}

// families parses every node's exposition and merges the families by name.
func (o *observed) families(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	all := map[string]*dto.MetricFamily{}
	for i := range o.metrics {
		for name, f := range scrape(t, "http://"+o.metrics[i]+"/metrics") {
			if all[name] == nil {
				all[name] = f
			}
		}
	}
	return all
}

// checkSeries queries the scrfs series Prometheus stored and checks their
// labels and values against what the job did.
func (o *observed) checkSeries(t *testing.T, p *promServer) {
	inst := func(i int) string { return o.metrics[i] }

	// Every daemon identifies itself: node index and scrfs job id.
	info := byInstance(t, "scrfs_node_info", p.mustQuery(t, `scrfs_node_info{job="scrfs"}`))
	if len(info) != len(o.metrics) {
		t.Fatalf("scrfs_node_info: %d series, want %d", len(info), len(o.metrics))
	}
	for i := range o.metrics {
		s, ok := info[inst(i)]
		if !ok || s.Metric["node"] != strconv.Itoa(i) || s.Metric["job_id"] != "e2e" || s.Metric["version"] == "" || s.float(t) != 1 {
			t.Errorf("scrfs_node_info of node %d (%s): %+v", i, inst(i), s)
		}
	}

	// Per-node counters and gauges, with the value each node must show.
	written := func(i int) float64 { return float64(o.written[i]) }
	exact := []struct {
		expr string
		want func(i int) float64
	}{
		{`scrfs_dataset_written_bytes_total`, written},
		{`scrfs_redundancy_encoded_bytes_total{scheme="xor"}`, written},
		{`scrfs_cache_used_bytes`, written},
		{`scrfs_flush_bytes_total{op="flush"}`, func(i int) float64 { return float64(o.flushed[i]) }},
		{`scrfs_datasets{state="protected"}`, func(int) float64 { return 2 }},
		{`scrfs_datasets{state="writing"}`, func(int) float64 { return 0 }},
		{`scrfs_redundancy_encode_duration_seconds_count{scheme="xor"}`, func(int) float64 { return 2 }},
		{`scrfs_dataset_completion_duration_seconds_count`, func(int) float64 { return 2 }},
		{`scrfs_flush_failures_total{op="flush"}`, func(int) float64 { return 1 }},
		{`scrfs_peer_link_up`, func(int) float64 { return 1 }},
	}
	for _, e := range exact {
		got := byInstance(t, e.expr, p.mustQuery(t, e.expr))
		for i := range o.metrics {
			s, ok := got[inst(i)]
			if !ok {
				t.Errorf("%s: no series for node %d (%s)", e.expr, i, inst(i))
				continue
			}
			if v := s.float(t); v != e.want(i) {
				t.Errorf("%s on node %d = %v, want %v", e.expr, i, v, e.want(i))
			}
		}
	}
	// Node 0 counted what happened to it only: the reconnect of node 1,
	// the garbage, the wrong secret.
	for _, e := range []string{
		`scrfs_peer_reconnects_total{peer="1"}`,
		`scrfs_peer_dropped_total{reason="garbage"}`,
		`scrfs_peer_auth_failures_total{reason="secret"}`,
	} {
		got := p.mustQuery(t, e)
		if len(got) != 1 || got[0].Metric["instance"] != inst(0) || got[0].float(t) < 1 {
			t.Errorf("%s: %+v, want one series of node 0 (%s) >= 1", e, got, inst(0))
		}
	}
	// Each node's link points at the other node.
	for _, s := range p.mustQuery(t, `scrfs_peer_link_up`) {
		self := info[s.Metric["instance"]].Metric["node"]
		if peer := s.Metric["peer"]; peer == "" || peer == self {
			t.Errorf("scrfs_peer_link_up of node %s names peer %q", self, peer)
		}
	}
	// Labels joined from scrfs_node_info, as the dashboard does.
	joined := p.mustQuery(t, `scrfs_dataset_written_bytes_total * on (instance, job) group_left (node) scrfs_node_info`)
	if len(joined) != len(o.written) {
		t.Errorf("written bytes joined with scrfs_node_info: %+v", joined)
	}
	for _, s := range joined {
		i, err := strconv.Atoi(s.Metric["node"])
		if err != nil || i >= len(o.written) || s.float(t) != float64(o.written[i]) {
			t.Errorf("written bytes joined with scrfs_node_info: %+v", s)
		}
	}
	// Node 0 coordinated both flushes, one good, one failed.
	for _, result := range []string{"ok", "failed"} {
		rounds := byInstance(t, "rounds", p.mustQuery(t, `scrfs_flush_rounds_total{op="flush",result="`+result+`"}`))
		if v := rounds[inst(0)].float(t); v != 1 {
			t.Errorf("%s flush rounds on node 0 = %v, want 1", result, v)
		}
		if v := rounds[inst(1)].float(t); v != 0 {
			t.Errorf("%s flush rounds on node 1 = %v, want 0 (node 0 coordinates)", result, v)
		}
	}
	for _, s := range p.mustQuery(t, `scrfs_flush_newest_timestamp_seconds`) {
		if v := s.float(t); v < float64(o.start.Unix()) || v > float64(time.Now().Unix()+1) {
			t.Errorf("newest flush timestamp on %s = %v, not within the test (%v)", s.Metric["instance"], v, o.start)
		}
	}
	// The refused write of the stray file, by operation and errno, on
	// node 0 only.
	errs := p.mustQuery(t, `scrfs_fuse_errors_total{errno="EFBIG"}`)
	if len(errs) != 1 || errs[0].Metric["instance"] != inst(0) || errs[0].Metric["op"] != "write" || errs[0].float(t) < 1 {
		t.Errorf("EFBIG errors: %+v", errs)
	}
}

// checkRulesLive checks that Prometheus loaded every rule of alerts.yml and
// evaluates each without error against the live series, that the rules
// use only metrics the daemons export, and that no alert fires but those
// the job caused.
func checkRulesLive(t *testing.T, p *promServer, exported map[string]bool) {
	type rule struct {
		Name           string `json:"name"`
		Query          string `json:"query"`
		State          string `json:"state"`
		Health         string `json:"health"`
		LastError      string `json:"lastError"`
		LastEvaluation string `json:"lastEvaluation"`
	}
	rules := func() []rule {
		data, err := p.apiGet(t, "/api/v1/rules", url.Values{"type": {"alert"}})
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Groups []struct {
				Rules []rule `json:"rules"`
			} `json:"groups"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		var out []rule
		for _, g := range r.Groups {
			out = append(out, g.Rules...)
		}
		return out
	}
	// Rule evaluation has no event either: poll until every rule ran once.
	var rs []rule
	evaluated := testutil.Poll(30*time.Second, func() bool {
		rs = rules()
		for _, r := range rs {
			if r.Health == "unknown" || strings.HasPrefix(r.LastEvaluation, "0001-") {
				return false
			}
		}
		return len(rs) > 0
	})
	if !evaluated {
		t.Fatalf("not every alerting rule evaluated within %v; last seen: %v", testutil.Scale(30*time.Second), rs)
	}
	if want := len(alertNames(t)); len(rs) != want {
		t.Errorf("Prometheus loaded %d alerting rules, alerts.yml has %d", len(rs), want)
	}
	// What the job went through fires two alerts; the cache alert depends
	// on the test machine's disk; nothing else may fire.
	firing := map[string]bool{"ScrfsFlushFailing": true, "ScrfsPeerAuthFailures": true}
	for _, r := range rs {
		checkNames(t, "alert "+r.Name, r.Query, exported)
		if r.Health != "ok" || r.LastError != "" {
			t.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.LastError)
		}
		switch {
		case r.Name == "ScrfsCacheNearlyFull":
		case firing[r.Name] && r.State != "firing":
			t.Errorf("alert %s is %s, want firing", r.Name, r.State)
		case !firing[r.Name] && r.State != "inactive":
			t.Errorf("alert %s is %s for a job that did not cause it", r.Name, r.State)
		}
	}
}
