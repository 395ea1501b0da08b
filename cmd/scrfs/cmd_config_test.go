package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Settings the layout cannot satisfy fail `scrfs config` and `scrfs mount`
// alike, with the configuration exit code and the keys named, before any
// daemon starts.
func TestConfigAndMountRefuseImpossibleLayouts(t *testing.T) {
	for _, k := range []string{"SLURM_JOB_NODELIST", "SLURM_NODEID", "SLURM_JOB_ID"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
	cases := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"SCRFS_CLUSTER_NODE_INDEX": "2"}, []string{"cluster.node_index = 2", "outside the 1 node(s)"}},
		{map[string]string{"SCRFS_REDUNDANCY_SCHEME": "xor"}, []string{"redundancy.scheme = xor", "1 node(s)"}},
		{map[string]string{"SCRFS_CLUSTER_NODES": "a,b,c,d", "SCRFS_REDUNDANCY_SCHEME": "rs", "SCRFS_REDUNDANCY_PARITY": "4"},
			[]string{"redundancy.parity = 4", "4 node(s) from cluster.nodes", "redundancy.set_size = 8"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(slices.Sorted(maps.Keys(tc.env)), ","), func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			mnt := filepath.Join(t.TempDir(), "mnt")
			for _, args := range [][]string{{"config"}, {"mount", mnt}} {
				var out, errb bytes.Buffer
				code := Main(args, &out, &errb)
				if code != exitConfig {
					t.Errorf("%v with %v: exit %d, want %d (config)\n%s", args, tc.env, code, exitConfig, errb.String())
				}
				for _, w := range tc.want {
					if !strings.Contains(errb.String(), w) {
						t.Errorf("%v with %v: message %q does not say %q", args, tc.env, errb.String(), w)
					}
				}
			}
		})
	}
}
