// Package testutil holds what the tests of several packages share.
package testutil

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// LeakCheckMain runs the tests, then fails the run if goroutines running
// code whose stack mentions one of markers (e.g. "scrfs/redundancy.") are
// still alive a few seconds later: every goroutine a package starts must
// have an owner that waits for it. Goroutines of TestMain itself are not
// counted, nor are fuzzing workers' (they run TestMain with a target still
// going).
func LeakCheckMain(m *testing.M, markers ...string) { os.Exit(LeakCheck(m.Run(), markers...)) }

// LeakCheck is LeakCheckMain's check, for a TestMain that does more
// around m.Run: given the tests' exit code, it returns it, or 1 if it was
// 0 and goroutines of markers outlive the tests (it prints them).
func LeakCheck(code int, markers ...string) int {
	if f := flag.Lookup("test.fuzz"); code != 0 || f != nil && f.Value.String() != "" {
		return code
	}
	// Exiting goroutines have nothing to wait on but the scheduler.
	var left []string
	if !Poll(5*time.Second, func() bool { left = goroutines(markers); return len(left) == 0 }) {
		fmt.Fprintf(os.Stderr, "%d goroutines leaked:\n%s\n", len(left), strings.Join(left, "\n\n"))
		return 1
	}
	return code
}

func goroutines(markers []string) []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, ".TestMain(") || strings.Contains(g, "testutil.LeakCheck") {
			continue
		}
		for _, m := range markers {
			if strings.Contains(g, m) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}
