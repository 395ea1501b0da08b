package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/scrfs/scrfs/cluster"
	"github.com/scrfs/scrfs/layout"
)

// runLayout prints the redundancy sets the configuration gives, computed
// exactly as the daemons compute them, with what each set and each level of
// the failure-domain tree tolerates. It needs no running daemon.
func runLayout(e *env, args []string) int {
	fs := e.flags("layout")
	asJSON := fs.Bool("json", false, "print the layout as JSON")
	file := fs.String("config", "", "configuration file (TOML)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	cfg, ok := e.loadConfig(*file)
	if !ok {
		return exitConfig
	}
	c, err := cluster.ResolveCluster(cfg, os.Environ())
	if err != nil {
		e.errorf("%v", err)
		return exitConfig
	}
	report := layout.Tolerance(c.Layout, c.Nodes, c.Scheme)
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			Self   int           `json:"self"`
			Addrs  []string      `json:"addrs"`
			Source string        `json:"source"`
			Report layout.Report `json:"layout"`
		}{c.Self, c.Addrs, c.Source, report})
		return exitOK
	}
	fmt.Fprintf(e.stdout, "%d nodes (from %s), this node is %d\n\n", c.Size(), c.Source, c.Self)
	fmt.Fprint(e.stdout, report.String())
	return exitOK
}
