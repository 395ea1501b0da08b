package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const alertsPath = "../docs/prometheus/alerts.yml"

// TestAlertRules checks docs/prometheus/alerts.yml with promtool, and runs
// its unit tests (docs/prometheus/alerts_test.yml): each alert fires on
// synthetic series that show its problem, with the labels and rendered
// annotations given there, and none fires for a healthy job. TestPrometheus
// evaluates the same rules against live daemons.
func TestAlertRules(t *testing.T) {
	promtool := requireTool(t, "promtool", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../docs/prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Every alert has a positive case in the unit tests.
	tests, err := os.ReadFile("../docs/prometheus/alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range alertNames(t) {
		if !regexp.MustCompile(`alertname: ` + name + `\n\s+exp_alerts:\n\s+- exp_labels`).Match(tests) {
			t.Errorf("alert %s has no test case where it fires", name)
		}
	}
}

// alertNames lists the alerts that alerts.yml defines.
func alertNames(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\w+)\s*$`).FindAllStringSubmatch(string(b), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatal("alerts.yml defines no alert")
	}
	return names
}
