package main

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/scrfs/scrfs/internal/testutil"
)

// A package main's frames are named main.f: its goroutines are told by
// the directory of their files.
func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "/bench/stall/") }

// TestCheckpointLayouts: each workload writes what issue 16 describes, for
// every rank of every node, and nothing else.
func TestCheckpointLayouts(t *testing.T) {
	const nodes, ranks = 2, 3
	w := newWriter(nodes*ranks, 3*ioSize+5, 4, 100)
	for name, want := range map[string]func(node, g int) []string{
		"large": func(node, g int) []string { return []string{"rank_" + itoa(g) + ".bin"} },
		"dcp":   func(node, g int) []string { return []string{"__" + itoa(g) + "_0.distcp"} },
		"small": func(node, g int) []string {
			return []string{"rank_" + itoa(g) + "/f0", "rank_" + itoa(g) + "/f1", "rank_" + itoa(g) + "/f2", "rank_" + itoa(g) + "/f3"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			wl := workloads[name]
			var roots []string
			for n := range nodes {
				roots = append(roots, filepath.Join(t.TempDir(), "node"+itoa(n)))
			}
			stall, err := w.checkpoint(wl, roots, ranks, "ckpt.1")
			if err != nil || stall <= 0 {
				t.Fatalf("checkpoint: %v, %v", stall, err)
			}
			for n, root := range roots {
				var files []string
				for r := range ranks {
					files = append(files, want(n, n*ranks+r)...)
				}
				if n == 0 {
					files = append(files, wl.marker)
				}
				got := walk(t, filepath.Join(root, "ckpt.1"))
				if len(got) != len(files) {
					t.Fatalf("node %d holds %v, want %v", n, got, files)
				}
				for _, f := range files {
					st, err := os.Stat(filepath.Join(root, "ckpt.1", f))
					if err != nil {
						t.Fatalf("node %d: %v", n, err)
					}
					if size := st.Size(); f != wl.marker && name != "small" && size != w.size {
						t.Errorf("%s: %d bytes, want %d", f, size, w.size)
					}
				}
			}
		})
	}
}

func TestSettleLeavesNothing(t *testing.T) {
	w := newWriter(2, 2*ioSize, 3, 10)
	dir := filepath.Join(t.TempDir(), "settle")
	if err := w.settle(dir, workloads["large"], 2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("settle left %s: %v", dir, err)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-size", "64MiB", "-schemes", "xor,rs", "-workloads", "small"}, io.Discard)
	if err != nil || o.size != 64<<20 || len(o.schemes) != 2 || o.workloads[0] != "small" || !o.settle {
		t.Fatalf("%+v, %v", o, err)
	}
	for _, bad := range [][]string{
		{"-size", "0"}, {"-schemes", "raid6"}, {"-workloads", "huge"}, {"-nodes", "1", "-schemes", "xor"},
		{"-small-size", "2MiB"}, {"-rounds", "0"}, {"extra"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

func walk(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }
