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
// code whose stack mentions marker (e.g. "scrfs/redundancy") are still alive
// a few seconds later: every goroutine a package starts must have an owner
// that waits for it. Goroutines of TestMain itself are not counted, nor are
// fuzzing workers' (they run TestMain with a target still going).
func LeakCheckMain(m *testing.M, marker string) {
	code := m.Run()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for code == 0 {
		left := goroutines(marker)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "%d goroutines leaked:\n%s\n", len(left), strings.Join(left, "\n\n"))
			code = 1
			break
		}
		// Exiting goroutines have nothing to wait on but the scheduler.
		time.Sleep(10 * time.Millisecond)
	}
	os.Exit(code)
}

func goroutines(marker string) []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, marker) && !strings.Contains(g, ".TestMain(") && !strings.Contains(g, "testutil.LeakCheckMain") {
			out = append(out, g)
		}
	}
	return out
}
