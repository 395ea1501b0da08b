package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/config"
)

// Every combination of settings the layout cannot satisfy is an error that
// wraps config.ErrInvalid and names the keys to change; the ones it can
// satisfy pass.
func TestCheckCombinations(t *testing.T) {
	four := []string{"n1", "n2", "n3", "n4"}
	hostfile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostfile, []byte("h1\nh2\nh3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		set  func(c *config.Config)
		env  []string
		want []string // substrings of the error; nil = valid
	}{
		{name: "single node defaults", set: func(c *config.Config) {}},
		{name: "empty node list, node_index 2",
			set:  func(c *config.Config) { c.Cluster.NodeIndex = 2 },
			want: []string{"cluster.node_index = 2", "outside the 1 node(s)", "cluster.nodes and cluster.hostfile are empty"}},
		{name: "empty node list, node_index 0", set: func(c *config.Config) { c.Cluster.NodeIndex = 0 }},
		{name: "empty node list with xor",
			set:  func(c *config.Config) { c.Redundancy.Scheme = config.SchemeXOR },
			want: []string{"redundancy.scheme = xor", "with 1 node(s) from single node", "redundancy.set_size = 8"}},
		{name: "empty node list with partner",
			set:  func(c *config.Config) { c.Redundancy.Scheme = config.SchemePartner },
			want: []string{"redundancy.replicas = 1", "1 node(s)"}},
		{name: "rs parity 4, set_size 8, 4 nodes",
			set: func(c *config.Config) {
				c.Cluster.Nodes, c.Redundancy.Scheme, c.Redundancy.Parity, c.Redundancy.SetSize = four, config.SchemeRS, 4, 8
			},
			want: []string{"redundancy.parity = 4", "smallest set has 4", "4 node(s) from cluster.nodes", "redundancy.set_size = 8"}},
		{name: "rs parity 3, set_size 8, 4 nodes",
			set: func(c *config.Config) {
				c.Cluster.Nodes, c.Redundancy.Scheme, c.Redundancy.Parity, c.Redundancy.SetSize = four, config.SchemeRS, 3, 8
			}},
		{name: "partner 3 replicas, set_size 4, 3 nodes",
			set: func(c *config.Config) {
				c.Cluster.Nodes, c.Redundancy.Scheme, c.Redundancy.Replicas, c.Redundancy.SetSize = four[:3], config.SchemePartner, 3, 4
			},
			want: []string{"redundancy.replicas = 3", "3 node(s) from cluster.nodes", "redundancy.set_size = 4"}},
		{name: "xor on a hostfile of 3", set: func(c *config.Config) { c.Cluster.Hostfile = hostfile }},
		{name: "node_index beyond the hostfile",
			set:  func(c *config.Config) { c.Cluster.Hostfile, c.Cluster.NodeIndex = hostfile, 3 },
			want: []string{"cluster.node_index = 3", "outside the 3 node(s)", "cluster.hostfile " + hostfile}},
		{name: "failure domains for fewer nodes than Slurm has",
			set:  func(c *config.Config) { c.Cluster.FailureDomains = []string{"r1", "r2"} },
			env:  []string{"SLURM_JOB_NODELIST=a[1-3]"},
			want: []string{"cluster.failure_domains", "2 failure domains for 3 nodes", "SLURM_JOB_NODELIST"}},
		{name: "failure domains of mixed depth",
			set: func(c *config.Config) {
				c.Cluster.Nodes, c.Cluster.FailureDomains = four, []string{"r1", "r1/e1", "r2", "r2"}
			},
			want: []string{"cluster.failure_domains", "same depth"}},
		{name: "SLURM_NODEID beyond the Slurm node list",
			env:  []string{"SLURM_JOB_NODELIST=a[1-3]", "SLURM_NODEID=3"},
			want: []string{"SLURM_NODEID=3 is outside the 3 node(s)", "cluster.node_index"}},
		{name: "Slurm job, index from Slurm", env: []string{"SLURM_JOB_NODELIST=a[1-3]", "SLURM_NODEID=2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			if tc.set != nil {
				tc.set(cfg)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the case must pass config.Validate (the layout check is what is tested): %v", err)
			}
			err := Check(cfg, tc.env)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error naming %q, got none", tc.want)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("error does not wrap config.ErrInvalid: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			// The daemon resolves the same way and fails the same way.
			if _, rerr := ResolveCluster(cfg, tc.env); rerr == nil || rerr.Error() != err.Error() {
				t.Errorf("ResolveCluster: %v, want the same error as Check", rerr)
			}
		})
	}
}
