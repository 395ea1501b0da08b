package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/prefix"
)

// testPrefix opens the prefix at dir with the key of SCRFS_PREFIX_KEY_FILE,
// which the test's first call sets to a new key: the user's key, as the
// command finds it.
func testPrefix(t *testing.T, dir string) *prefix.Prefix {
	t.Helper()
	path := os.Getenv("SCRFS_PREFIX_KEY_FILE")
	if path == "" {
		path = filepath.Join(t.TempDir(), "prefix.key")
		t.Setenv("SCRFS_PREFIX_KEY_FILE", path)
	}
	key, err := prefix.LoadKey(path, true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := prefix.Open(context.Background(), prefix.Config{Location: dir, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// readIndex reads the index at dir as the command does.
func readIndex(t *testing.T, dir string) (*prefix.Index, error) {
	return testPrefix(t, dir).ReadIndex(context.Background())
}

// listPrefix makes a prefix whose index holds two complete datasets (one
// with a failed fetch) and one still flushing.
func listPrefix(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	err := testPrefix(t, dir).UpdateIndex(context.Background(), nil, func(ix *prefix.Index) error {
		for _, e := range []prefix.IndexEntry{
			{Name: "ckpt.10", ID: 10, State: prefix.StateComplete, Nodes: 4, Files: 16, Bytes: 3 << 30, Flushed: at},
			{Name: "ckpt.20", ID: 20, State: prefix.StateComplete, Nodes: 4, Files: 16, Bytes: 5 << 20, Flushed: at.Add(time.Hour)},
			{Name: "ckpt.30", ID: 30, State: prefix.StateFlushing, Nodes: 4},
		} {
			if err := ix.Put(e); err != nil {
				return err
			}
		}
		return ix.AddFetchFailure("ckpt.20", prefix.FetchFailure{Time: at, Node: 2, Reason: "corrupt /p/ckpt.20/x: crc32c 1, manifest says 2"})
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestListTable(t *testing.T) {
	dir := listPrefix(t)
	out, errs, code := runCLI(t, "list", "--prefix", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(out, "\n")
	// Newest first, then the failed fetch's reason.
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "ckpt.") {
			rows = append(rows, strings.Fields(l)[0]+" "+strings.Fields(l)[1])
		}
	}
	if got := strings.Join(rows, ","); got != "ckpt.30 flushing,ckpt.20 complete,ckpt.10 complete,ckpt.20: fetch" {
		t.Fatalf("rows %q in\n%s", got, out)
	}
	for _, want := range []string{"3.0 GiB", "5.0 MiB", "fetch failed on node 2", "crc32c 1, manifest says 2", "3 datasets"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestListJSON(t *testing.T) {
	dir := listPrefix(t)
	out, errs, code := runCLI(t, "list", "--json", "--prefix", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var ix prefix.Index
	if err := json.Unmarshal([]byte(out), &ix); err != nil {
		t.Fatal(err)
	}
	onDisk, err := readIndex(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Datasets) != 3 || ix.Datasets[1].Name != onDisk.Datasets[1].Name || len(ix.Datasets[1].FailedFetches) != 1 {
		t.Fatalf("--json printed %+v", ix)
	}
}

func TestListSetCurrent(t *testing.T) {
	dir := listPrefix(t)
	if _, errs, code := runCLI(t, "list", "--prefix", dir, "--set-current", "ckpt.10"); code != exitOK {
		t.Fatalf("set current: exit %d: %s", code, errs)
	}
	ix, _ := readIndex(t, dir)
	if ix.Current != "ckpt.10" {
		t.Fatalf("current %q", ix.Current)
	}
	out, _, _ := runCLI(t, "list", "--prefix", dir)
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[0], "ckpt.") && !strings.HasSuffix(f[0], ":") {
			if marked := strings.Contains(l, " * "); marked != (f[0] == "ckpt.10") {
				t.Errorf("current mark wrong in %q", l)
			}
		}
	}
	// A missing dataset is "not found"; one still flushing cannot be current.
	if _, errs, code := runCLI(t, "list", "--prefix", dir, "--set-current", "nope"); code != exitNotFound || !strings.Contains(errs, "nope") {
		t.Fatalf("set current nope: exit %d: %s", code, errs)
	}
	if _, errs, code := runCLI(t, "list", "--prefix", dir, "--set-current", "ckpt.30"); code != exitError || !strings.Contains(errs, "not complete") {
		t.Fatalf("set current ckpt.30: exit %d: %s", code, errs)
	}
	// Marking a dataset that failed a fetch clears the failures: the
	// user means it to be fetched.
	if _, errs, code := runCLI(t, "list", "--prefix", dir, "--set-current", "ckpt.20"); code != exitOK {
		t.Fatalf("set current ckpt.20: exit %d: %s", code, errs)
	}
	if ix, _ := readIndex(t, dir); ix.Current != "ckpt.20" || len(ix.Datasets[1].FailedFetches) != 0 {
		t.Fatalf("after --set-current ckpt.20: current %q, failed fetches %+v", ix.Current, ix.Datasets[1].FailedFetches)
	}
	// "" clears the mark.
	if _, errs, code := runCLI(t, "list", "--prefix", dir, "--set-current", ""); code != exitOK {
		t.Fatalf("clear current: exit %d: %s", code, errs)
	}
	if ix, _ := readIndex(t, dir); ix.Current != "" {
		t.Fatalf("current %q after clearing", ix.Current)
	}
}

func TestListErrors(t *testing.T) {
	// No prefix anywhere.
	t.Setenv("SCRFS_PATHS_PREFIX", "") // restored after the test
	os.Unsetenv("SCRFS_PATHS_PREFIX")
	if _, errs, code := runCLI(t, "list", "--config", writeConfig(t, "")); code != exitConfig || !strings.Contains(errs, "paths.prefix") {
		t.Fatalf("no prefix: exit %d: %s", code, errs)
	}
	// The prefix from the configuration, with nothing flushed yet.
	empty := t.TempDir()
	out, errs, code := runCLI(t, "list", "--config", writeConfig(t, "[paths]\nprefix = \""+empty+"\"\n"))
	if code != exitOK || !strings.Contains(out, "0 datasets") {
		t.Fatalf("empty prefix: exit %d: %s%s", code, out, errs)
	}
	// A corrupt index is reported with its path, never overwritten.
	dir := listPrefix(t)
	index := filepath.Join(dir, ".scrfs", "index.json")
	if err := os.Truncate(index, 40); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := runCLI(t, "list", "--prefix", dir); code != exitError || !strings.Contains(errs, index) || !strings.Contains(errs, "corrupt scrfs metadata") {
		t.Fatalf("corrupt index: exit %d: %s", code, errs)
	}
	if _, _, code := runCLI(t, "list", "--prefix", dir, "--set-current", "ckpt.10"); code != exitError {
		t.Fatalf("set current on a corrupt index: exit %d", code)
	}
	if st, _ := os.Stat(index); st.Size() != 40 {
		t.Fatal("corrupt index rewritten")
	}
	if _, _, code := runCLI(t, "list", "extra"); code != exitUsage {
		t.Fatalf("extra argument: exit %d", code)
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "scrfs.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
