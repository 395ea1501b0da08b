package daemon

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/scrfs/scrfs/"

// layers places every package of scrfs but the programs and tests at the
// top (cmd/scrfs, bench/..., e2e) on a layer of the design docs/design.md
// draws. A package imports only packages of lower layers: never one of its
// own layer (the coordination packages do not know each other, nor fs
// them) and never one above. A package missing here fails the test: where
// a new package sits is a design decision, made here and in the design
// document together.
var layers = [][]string{
	// Ground: utilities and pure functions that know nothing of scrfs.
	{"internal/atomicfile", "internal/beneath", "internal/crc32c", "internal/group", "internal/loopback", "internal/secretfile", "internal/sleep", "layout", "fs/mount"},
	// What the rest is built on: the directories of a job, authenticated
	// links, configuration, a dataset's file list, the message layer.
	{"internal/jobdir", "internal/testutil", "peer", "config", "files", "jobnet"},
	// Who the job is, the node-local store, the redundancy file format,
	// the prefix, the message layer's transports, the control socket's ABI;
	// the S3 server of the tests.
	{"control", "cluster", "cache", "redfile", "prefix", "jobnet/memnet", "jobnet/peernet", "internal/s3test"},
	// A completed dataset's record; the erasure codes.
	{"record", "schemes"},
	// The mount's node tree and the coordination protocols.
	{"fs", "completion", "redundancy", "transfer", "namespace", "names", "pointers"},
	// The node builder.
	{"node"},
	// What runs nodes: the daemon, the in-process job harness.
	{"daemon", "node/nodetest"},
}

// links says which packages may link a module outside scrfs, directly or
// through others (go list -deps); the top (cmd/scrfs, bench/..., e2e) may
// link anything.
var links = map[string][]string{
	// go-fuse: the node tree and the mount, and what builds them.
	"github.com/hanwen/go-fuse": {"fs", "fs/mount", "daemon"},
	// The erasure code: the schemes and who runs them; fs, completion,
	// transfer, record, redfile and prefix need a dataset's files or
	// record, not the code.
	"github.com/klauspost/reedsolomon": {"schemes", "redundancy", "namespace", "node", "daemon", "node/nodetest"},
	// The AWS SDK: the prefix, whose object store it is, and who runs it
	// (flush rounds and fetch); the tests' S3 server. The cache, fs and the
	// other protocols do not link it.
	"github.com/aws/aws-sdk-go-v2": {"prefix", "transfer", "node", "daemon", "node/nodetest", "internal/s3test"},
}

// pkgInfo is what go list says of one package.
type pkgInfo struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// listPackages lists every package of the module with its imports and
// dependencies (not its tests').
func listPackages(t *testing.T) []pkgInfo {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", mod+"...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	var pkgs []pkgInfo
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkgInfo
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, mod)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// layerOf returns pkg's layer, or -1 for the top.
func layerOf(t *testing.T, pkg string) int {
	for i, l := range layers {
		if slices.Contains(l, pkg) {
			return i
		}
	}
	if pkg == "cmd/scrfs" || pkg == "e2e" || strings.HasPrefix(pkg, "bench/") {
		return -1
	}
	t.Errorf("package %s has no layer: place it in layers (and docs/design.md)", pkg)
	return -1
}

// TestImportRules checks the design's rules on the module's import graph:
// layers (above), what may link go-fuse and the erasure code, and where
// packages may be used from.
func TestImportRules(t *testing.T) {
	for _, p := range listPackages(t) {
		layer := layerOf(t, p.ImportPath)
		for _, imp := range p.Imports {
			own, ok := strings.CutPrefix(imp, mod)
			if !ok {
				if strings.HasPrefix(imp, "github.com/hanwen/go-fuse") && p.ImportPath != "fs" && p.ImportPath != "fs/mount" && p.ImportPath != "bench/loopback" {
					t.Errorf("%s imports %s: only fs and fs/mount may (and bench/loopback, go-fuse's own baseline)", p.ImportPath, imp)
				}
				continue
			}
			if l := layerOf(t, own); layer >= 0 && (l < 0 || l >= layer) {
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only lower layers", p.ImportPath, layer, own, l)
			}
		}
		for _, dep := range p.Deps {
			own, inModule := strings.CutPrefix(dep, mod)
			switch {
			case strings.HasPrefix(p.ImportPath, "internal/") && inModule && !strings.HasPrefix(own, "internal/"):
				t.Errorf("%s depends on %s: internal/ holds ground utilities only", p.ImportPath, own)
			case p.ImportPath == "jobnet" && own == "peer":
				t.Errorf("jobnet depends on peer: only jobnet/peernet joins them")
			case own == "daemon" && p.ImportPath != "cmd/scrfs":
				t.Errorf("%s depends on daemon: only the command line runs it", p.ImportPath)
			case own == "node/nodetest":
				t.Errorf("%s depends on node/nodetest, the test harness", p.ImportPath)
			}
			for module, may := range links {
				if strings.HasPrefix(dep, module) && layer >= 0 && !slices.Contains(may, p.ImportPath) {
					t.Errorf("%s links %s", p.ImportPath, module)
				}
			}
		}
	}
}
