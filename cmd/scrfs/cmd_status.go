package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/internal/sleep"
)

func runStatus(e *env, args []string) int {
	fs := e.flags("status")
	asJSON := fs.Bool("json", false, "print the status as JSON (schema in docs/cli.md)")
	wait := fs.Duration("wait-ready", 0, "wait up to this long for the daemon to be ready (0 = don't wait)")
	dir := fs.String("control", "", "the daemon's control directory (default: from the configuration)")
	file := fs.String("config", "", "configuration file, to find the control directory")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	c, ok := e.controlClient(*dir, *file)
	if !ok {
		return exitConfig
	}
	ctx := context.Background()
	st, err := statusWhenReady(ctx, c, *wait)
	if err != nil {
		return e.exitFor(err)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(st)
		return exitOK
	}
	printStatus(e.stdout, st)
	return exitOK
}

// statusWhenReady fetches the status, waiting up to wait for a daemon that
// is still starting (no socket yet, or not mounted yet).
func statusWhenReady(ctx context.Context, c *control.Client, wait time.Duration) (*control.Status, error) {
	deadline := time.Now().Add(wait)
	b := sleep.Backoff{Min: 20 * time.Millisecond, Max: 500 * time.Millisecond}
	for {
		st, err := c.Status(ctx)
		ready := err == nil && st.Node.Ready
		if wait == 0 || ready {
			return st, err
		}
		if err != nil && !errors.Is(err, control.ErrNoDaemon) {
			return nil, err
		}
		if time.Now().After(deadline) {
			if err == nil {
				return nil, fmt.Errorf("daemon not ready after %v", wait)
			}
			return nil, fmt.Errorf("%w after waiting %v", err, wait)
		}
		time.Sleep(b.Next())
	}
}

func printStatus(w io.Writer, st *control.Status) {
	n := st.Node
	fmt.Fprintf(w, "node %d of %d on %s (pid %d, scrfs %s), up %s, job %s\n",
		n.Index, n.Nodes, n.Hostname, n.PID, n.Version, roundDuration(n.Uptime), n.Job)
	ready := "ready"
	if !n.Ready {
		ready = "starting"
	}
	fmt.Fprintf(w, "mount %s (%s, data path: %s), scheme %s (%s), keeps %d completed\n",
		n.Mountpoint, ready, n.DataPath, n.Scheme, n.RedundancyPath, n.CacheSize)
	fmt.Fprintf(w, "cache %s: %s in datasets, %s free of %s\n",
		n.CacheDir, humanBytes(n.Cache.UsedBytes), humanBytes(n.Cache.AvailableBytes), humanBytes(n.Cache.CapacityBytes))
	if n.Prefix != "" {
		fmt.Fprintf(w, "prefix %s\n", n.Prefix)
	}
	if r := n.Restored; r != nil {
		fmt.Fprintf(w, "restored %s\n", restoredLine(*r))
	}
	if p := n.Fetching; p != nil {
		fmt.Fprintf(w, "fetching %s from the prefix: %s of %s (this node's part), %s/s\n",
			p.Dataset, humanBytes(p.DoneBytes), humanBytes(p.TotalBytes), humanBytes(int64(p.BytesPerSecond)))
	}
	if n.TakingStock {
		fmt.Fprintln(w, "the job is taking stock (verifying every node's datasets; rebuilds may follow): the states below may change")
	}
	if ro := n.ReadOnly; ro != nil {
		fmt.Fprintf(w, "READ-ONLY since %s (%s ago, %d failed writes): the cache state cannot be written (%s: %s); completed datasets are served, new ones refused (ENOSPC); retrying\n",
			ro.Since.Local().Format(time.DateTime), roundDuration(time.Since(ro.Since).Seconds()), ro.FailedWrites, ro.Reason, ro.Error)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tFILES\tBYTES\tAGE\tNOTE")
	for _, d := range st.Datasets {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", d.Name, d.State, d.Files, humanBytes(d.Bytes), roundDuration(d.Age), note(d))
	}
	for _, d := range st.Failed {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", d.Name, d.State, d.Files, humanBytes(d.Bytes), roundDuration(d.Age), d.Reason)
	}
	tw.Flush()
	if len(st.Datasets)+len(st.Failed) == 0 {
		fmt.Fprintln(w, "(no datasets)")
	}
	if len(st.Peers) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PEER\tADDRESS\tLINK\tNOTE")
		for _, p := range st.Peers {
			link, note := "up", ""
			if !p.Up {
				// The last error of a link that is up again belongs to
				// the past: it is in the JSON, not in the note.
				link, note = "down", p.LastError
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", p.Index, p.Addr, link, note)
		}
		tw.Flush()
	}
}

// restoredLine says which checkpoint the daemon's start restored, from
// where and why.
func restoredLine(r control.Restored) string {
	var s string
	switch r.From {
	case "cache":
		s = r.Dataset + " from the caches"
	case "prefix":
		s = r.Dataset + " from the prefix"
	default:
		s = "nothing"
	}
	if r.Reason != "" {
		s += " (" + r.Reason + ")"
	}
	return s
}

// note says what a dataset is waiting for or why it is in its state.
func note(d control.Dataset) string {
	switch {
	case d.Completing != "" && d.State == "writing" && d.Reason != "":
		return fmt.Sprintf("completing (%s): %s", d.Completing, d.Reason)
	case d.Completing != "" && d.State == "writing":
		return fmt.Sprintf("completing (%s), %d open for write", d.Completing, d.OpenWrite)
	case d.OpenWrite > 0:
		return fmt.Sprintf("%d open for write", d.OpenWrite)
	case d.Flush != nil:
		return flushDetail(*d.Flush) // with rate and ETA while flushing
	}
	return d.Reason
}

func roundDuration(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// humanBytes prints a byte count in binary units, exact to three digits.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
