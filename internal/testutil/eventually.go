package testutil

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/sleep"
)

// ScaleEnv names the environment variable that multiplies every timeout
// the tests wait with (Scale): on a loaded or slow machine, or under the
// race detector, SCRFS_TEST_TIMEOUT_SCALE=3 gives each wait three times as
// long. It takes a number above 0 (fractions too); unset means 1.
const ScaleEnv = "SCRFS_TEST_TIMEOUT_SCALE"

// scale is ScaleEnv's factor, read once. A factor that cannot be applied
// makes the run a broken one, not one with a default.
var scale = sync.OnceValue(func() float64 {
	f, err := parseScale(os.Getenv(ScaleEnv))
	if err != nil {
		panic(err.Error())
	}
	return f
})

// parseScale reads ScaleEnv's value v.
func parseScale(v string) (float64, error) {
	if v == "" {
		return 1, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s=%q: want a number above 0", ScaleEnv, v)
	}
	return f, nil
}

// Scale returns timeout d multiplied by ScaleEnv's factor.
func Scale(d time.Duration) time.Duration { return time.Duration(float64(d) * scale()) }

// pollPause is the pause between two looks at a condition: it starts at
// 1 ms, so a condition about to hold is seen at once, and doubles up to
// 20 ms, so a long wait does not load what it asks (a daemon's status,
// the store's lock).
var pollPause = sleep.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond}

// Poll evaluates cond until it holds or timeout, scaled (Scale), has
// passed, and reports whether it held; cond is evaluated once more when
// the time is up. Polling is for a state with no event of its own: where
// an event can be awaited, await it. Where the test fails if cond never
// holds, Eventually says so; Poll is for a wait that cannot fail the test
// at once (on a goroutine) or has more to say than what it waited for.
func Poll(timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), Scale(timeout))
	defer cancel()
	b := pollPause
	for !cond() {
		if b.Wait(ctx) != nil {
			return cond()
		}
	}
	return true
}

// Eventually fails the test at once unless cond holds within timeout,
// scaled (Scale), saying what it waited for.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("after %v still waiting for %s", Scale(timeout), what)
	}
}
