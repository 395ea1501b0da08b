package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// A real Prometheus server for the tests, and its HTTP API.

// requireTool returns the path of an external tool, or skips the test
// naming the Debian package that has it (.ci/run installs it; tests never
// install anything).
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found (apt-get install %s)", name, pkg)
	}
	return p
}

// promServer is a Prometheus server run for one test.
type promServer struct {
	url string
	log *logWatch
}

// startPrometheus runs /usr/bin/prometheus on a free loopback port with
// temporary storage, scraping targets every second as job "scrfs" and
// evaluating ruleFiles every second, and waits until it serves requests.
func startPrometheus(t *testing.T, targets, ruleFiles []string) *promServer {
	t.Helper()
	bin := requireTool(t, "prometheus", "prometheus")
	dir := t.TempDir()
	quoted := func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: %s
scrape_configs:
  - job_name: scrfs
    static_configs:
      - targets: %s
`, quoted(ruleFiles), quoted(targets))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// Below the ephemeral range, as for the daemons (loopback.FreePort).
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, 1)))
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &promServer{url: "http://" + addr, log: newLogWatch()}
	exited := make(chan struct{})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.log.consume(stderr)
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.log.String())
		}
	})
	if _, ok := p.log.wait(60*time.Second, exited, "Server is ready to receive web requests"); !ok {
		t.Fatalf("prometheus did not become ready:\n%s", p.log.String())
	}
	return p
}

// promSample is one element of an instant vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSample) float(t *testing.T) float64 {
	t.Helper()
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Fatalf("sample %v: %v", s, err)
	}
	return v
}

// apiGet calls a Prometheus HTTP API endpoint and returns its data, or the
// error Prometheus gave (a parse error of an expression, say).
func (p *promServer) apiGet(t *testing.T, path string, q url.Values) (json.RawMessage, error) {
	t.Helper()
	resp, err := http.Get(p.url + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("%s: decode: %v", path, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return r.Data, nil
}

// query evaluates expr now. It returns the instant vector, or the error
// Prometheus gave; a result of another type is returned as one sample
// without labels.
func (p *promServer) query(t *testing.T, expr string) ([]promSample, error) {
	t.Helper()
	data, err := p.apiGet(t, "/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	var r struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	switch r.ResultType {
	case "vector":
		var v []promSample
		if err := json.Unmarshal(r.Result, &v); err != nil {
			t.Fatalf("query %s: %v", expr, err)
		}
		return v, nil
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(r.Result, &s); err != nil {
			t.Fatalf("query %s: %v", expr, err)
		}
		return []promSample{{Value: s}}, nil
	}
	t.Fatalf("query %s: result type %s", expr, r.ResultType)
	return nil, nil
}

// mustQuery is query for expressions that must work.
func (p *promServer) mustQuery(t *testing.T, expr string) []promSample {
	t.Helper()
	v, err := p.query(t, expr)
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	return v
}

// awaitQuery polls expr until it returns a single value >= want: a scrape
// is a state change inside another server that sends no event.
func (p *promServer) awaitQuery(t *testing.T, timeout time.Duration, expr string, want float64) {
	t.Helper()
	var v []promSample
	if !testutil.Poll(timeout, func() bool { v = p.mustQuery(t, expr); return len(v) == 1 && v[0].float(t) >= want }) {
		t.Fatalf("%s >= %v not within %v; last seen: %v", expr, want, testutil.Scale(timeout), v)
	}
}

// byInstance indexes samples by their instance label; two samples for one
// instance fail the test.
func byInstance(t *testing.T, expr string, v []promSample) map[string]promSample {
	t.Helper()
	out := map[string]promSample{}
	for _, s := range v {
		in := s.Metric["instance"]
		if _, dup := out[in]; dup {
			t.Fatalf("%s: two series for instance %s: %v", expr, in, v)
		}
		out[in] = s
	}
	return out
}
