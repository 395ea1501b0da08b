package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/prefix"
)

// runList prints the prefix's job index, as scr_index does. It reads the
// index itself: no daemon needs to run (after the job, on a login node,
// say). Entries are verified with the user's prefix key where there is
// one; without it they are shown, marked unverified.
func runList(e *env, args []string) int {
	fs := e.flags("list")
	asJSON := fs.Bool("json", false, "print the index as JSON (the format of <prefix>/.scrfs/index.json)")
	prefixDir := fs.String("prefix", "", "prefix directory or s3://bucket/path (default: paths.prefix of the configuration)")
	file := fs.String("config", "", "configuration file, for paths.prefix and the prefix key")
	var current string
	setCurrent := false
	fs.Func("set-current", `mark dataset NAME as the one a restart fetches, even if newer ones exist ("" clears the mark)`,
		func(v string) error { current, setCurrent = v, true; return nil })
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	cfg, ok := e.loadConfig(*file)
	if !ok {
		return exitConfig
	}
	loc := *prefixDir
	if loc == "" {
		loc = cfg.Paths.Prefix
	}
	if loc == "" {
		e.errorf("no prefix: set paths.prefix (SCRFS_PATHS_PREFIX) or give --prefix")
		return exitConfig
	}
	if abs, err := filepath.Abs(loc); err == nil && !layout.PrefixIsS3(loc) {
		loc = abs
	}
	ctx := context.Background()
	keyPath, err := prefix.KeyPath(cfg.Prefix.KeyFile)
	var key []byte
	if err == nil {
		key, err = prefix.LoadKey(keyPath, false)
	}
	if err != nil && !prefix.IsNoKey(err) {
		e.errorf("%v", err)
		return exitConfig
	}
	p, err := prefix.Open(ctx, prefix.Config{Location: loc, Key: key, TrustUnsigned: cfg.Prefix.TrustUnsigned})
	if err != nil {
		e.errorf("%v", err)
		return exitConfig
	}
	defer p.Close()
	if setCurrent {
		if code := e.setCurrent(ctx, p, current); code != exitOK {
			return code
		}
	}
	ix, err := p.ReadIndex(ctx)
	if err != nil {
		e.errorf("%v", err)
		return exitError
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(ix)
		return exitOK
	}
	printIndex(e.stdout, p.String(), ix)
	if key == nil {
		fmt.Fprintf(e.stdout, "\nno prefix key (%s): nothing above could be verified\n", keyPath)
	}
	return exitOK
}

// setCurrent marks (or with "" clears) the dataset a restart fetches.
func (e *env) setCurrent(ctx context.Context, p *prefix.Prefix, name string) int {
	code := exitOK
	err := p.UpdateIndex(ctx, nil, func(ix *prefix.Index) error {
		if _, ok := ix.Lookup(name); name != "" && !ok {
			code = exitNotFound
			return fmt.Errorf("set current: no dataset %q in the index of %s", name, p)
		}
		return ix.SetCurrent(name)
	})
	if err != nil {
		e.errorf("%v", err)
		if code == exitOK {
			code = exitError
		}
		return code
	}
	return exitOK
}

// macColumn says in the table whether an entry's MAC verifies: one that
// does not is never fetched.
var macColumn = map[prefix.Trust]string{prefix.Verified: "ok", prefix.Unsigned: "none", prefix.Forged: "BAD"}

// printIndex prints the index newest first, then the reasons of failed
// fetches.
func printIndex(w io.Writer, dir string, ix *prefix.Index) {
	fmt.Fprintf(w, "prefix %s: %d datasets\n", dir, len(ix.Datasets))
	if len(ix.Datasets) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tSIZE\tFILES\tNODES\tFLUSHED\tCURRENT\tFAILED FETCHES\tMAC")
	for i := len(ix.Datasets) - 1; i >= 0; i-- {
		d := ix.Datasets[i]
		cur, flushed, failed := "", "-", "-"
		if d.Name == ix.Current {
			cur = "*"
		}
		if !d.Flushed.IsZero() {
			flushed = d.Flushed.Local().Format(time.DateTime)
		}
		if n := len(d.FailedFetches); n > 0 {
			failed = strconv.Itoa(n)
		}
		size := humanBytes(d.Bytes)
		if d.State != prefix.StateComplete {
			size = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", d.Name, d.State, size, d.Files, d.Nodes, flushed, cur, failed, macColumn[d.Trust])
	}
	tw.Flush()
	for i := len(ix.Datasets) - 1; i >= 0; i-- {
		d := ix.Datasets[i]
		if n := len(d.FailedFetches); n > 0 {
			f := d.FailedFetches[n-1]
			fmt.Fprintf(w, "\n%s: fetch failed on node %d at %s: %s", d.Name, f.Node, f.Time.Local().Format(time.DateTime), f.Reason)
		}
	}
	for _, d := range ix.Datasets {
		if len(d.FailedFetches) > 0 {
			fmt.Fprintln(w)
			break
		}
	}
}
