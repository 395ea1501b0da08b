package daemon

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportRules checks the package boundaries docs/design.md draws: only
// fs and the packages below it (fs/mount) import go-fuse (and the
// benchmarks' own baselines), the node tree knows nothing of its mount,
// the coordination packages know neither each other nor fs nor the
// daemon, the leaf packages know no coordination, and the leaf packages
// others build on import only what they are built on.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "github.com/scrfs/scrfs/...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	const mod = "github.com/scrfs/scrfs/"
	coordination := []string{"jobnet", "jobnet/memnet", "completion", "redundancy", "transfer"}
	forbidden := map[string][]string{
		"cache":      {"fs", "peer", "schemes", "prefix", "daemon", "jobnet", "redundancy", "transfer"},
		"layout":     {"cache", "fs", "peer", "schemes", "prefix", "config", "daemon"},
		"schemes":    {"fs", "peer", "prefix", "cache", "daemon", "jobnet", "record"},
		"prefix":     {"fs", "peer", "schemes", "cache", "daemon", "jobnet"},
		"peer":       {"cache", "fs", "schemes", "prefix", "daemon", "jobnet"},
		"control":    {"cache", "fs", "daemon", "redundancy", "transfer"},
		"jobnet":     {"cache", "fs", "schemes", "prefix", "daemon", "redundancy", "transfer"},
		"redundancy": {"fs", "prefix", "peer", "daemon", "transfer"},
		"transfer":   {"fs", "schemes", "peer", "daemon", "redundancy", "control"},
		"completion": {"fs", "prefix", "peer", "daemon", "redundancy", "transfer", "schemes"},
		"namespace":  {"fs", "peer", "prefix", "daemon", "completion", "redundancy", "transfer"},
		"record":     {"cache", "fs", "peer", "prefix", "daemon", "jobnet", "completion", "redundancy", "transfer", "schemes"},
		"cmd/scrfs":  {"redundancy", "transfer", "jobnet"},
		"fs":         {"fs/mount", "peer", "jobnet", "completion", "redundancy", "transfer", "namespace", "prefix", "daemon", "schemes"},
	}
	// Leaf packages below others import nothing of scrfs but these.
	only := map[string][]string{
		"files":   {"layout"},
		"redfile": {"layout", "files"},
	}
	// fs/mount serves any node tree and imports nothing of scrfs, so
	// fs's own tests can mount with it.
	const mountPkg = "fs/mount"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, imports := strings.TrimPrefix(f[0], mod), f[1:]
		for _, imp := range imports {
			if strings.HasPrefix(imp, "github.com/hanwen/go-fuse") && pkg != "fs" && !strings.HasPrefix(pkg, "fs/") && !strings.HasPrefix(pkg, "bench/") {
				t.Errorf("%s imports %s: only fs and fs/... may", pkg, imp)
			}
			own := strings.TrimPrefix(imp, mod)
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			if pkg == mountPkg {
				t.Errorf("%s imports %s", pkg, own)
			}
			if slices.Contains(forbidden[pkg], own) {
				t.Errorf("%s imports %s", pkg, own)
			}
			if allowed, leaf := only[pkg]; leaf && !slices.Contains(allowed, own) && !strings.HasPrefix(own, "internal/") {
				t.Errorf("leaf package %s imports %s", pkg, own)
			}
			if slices.Contains(coordination, pkg) && slices.Contains(coordination, own) && own != "jobnet" {
				t.Errorf("coordination package %s imports %s", pkg, own)
			}
		}
	}
}

// TestErasureCodeStaysInSchemes: the packages that only need a dataset's
// files, its record or the redundancy file format do not link the erasure
// code (Reed-Solomon), which only the schemes and who runs them need.
func TestErasureCodeStaysInSchemes(t *testing.T) {
	const mod = "github.com/scrfs/scrfs/"
	for _, pkg := range []string{"files", "redfile", "record", "prefix", "fs", "completion", "transfer"} {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "reedsolomon") || dep == mod+"schemes" {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}
