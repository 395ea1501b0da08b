package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// Flush and fetch end to end: real daemons flush to a prefix directory on
// disk, the tests read what landed there by the documented formats
// (docs/formats-prefix.md) without the prefix package, wipe caches, corrupt
// bytes, truncate metadata and kill daemons mid-flush.

// prefixIndex is index.json as documented.
type prefixIndex struct {
	Version  int          `json:"version"`
	Current  string       `json:"current"`
	Datasets []indexEntry `json:"datasets"`
}

type indexEntry struct {
	Name          string    `json:"name"`
	ID            uint64    `json:"id"`
	State         string    `json:"state"`
	Nodes         int       `json:"nodes"`
	Files         int64     `json:"files"`
	Bytes         int64     `json:"bytes"`
	Kind          string    `json:"kind"`
	Root          string    `json:"root"`
	Flushed       time.Time `json:"flushed"`
	FailedFetches []struct {
		Node   int    `json:"node"`
		Reason string `json:"reason"`
	} `json:"failed_fetches"`
}

func readPrefixIndex(t *testing.T, prefix string) *prefixIndex {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(prefix, ".scrfs", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ix prefixIndex
	if err := json.Unmarshal(b, &ix); err != nil || ix.Version != 1 {
		t.Fatalf("index.json: version %d, %v\n%s", ix.Version, err, b)
	}
	return &ix
}

// entry returns the index entry of name, failing the test if absent.
func (ix *prefixIndex) entry(t *testing.T, name string) *indexEntry {
	t.Helper()
	for i := range ix.Datasets {
		if ix.Datasets[i].Name == name {
			return &ix.Datasets[i]
		}
	}
	t.Fatalf("index has no dataset %s: %+v", name, ix.Datasets)
	return nil
}

func (ix *prefixIndex) has(name string) bool {
	for _, d := range ix.Datasets {
		if d.Name == name {
			return true
		}
	}
	return false
}

// manifestEntry is one line of a merged manifest.
type manifestEntry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	CRC32C string `json:"crc32c"`
	Target string `json:"target"`
	Node   int    `json:"node"`
}

// checkManifest reads the merged manifest of dataset and checks it against
// the prefix tree: every file's size and CRC32C, every link's target, and
// the node that wrote each (owner(path) gives the expected node). It
// returns the entries by path.
func checkManifest(t *testing.T, prefix, dataset string, nodes int, owner func(path string) int) map[string]manifestEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(prefix, ".scrfs", "manifests", dataset, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Version int             `json:"version"`
		Dataset string          `json:"dataset"`
		Nodes   int             `json:"nodes"`
		Files   int64           `json:"files"`
		Bytes   int64           `json:"bytes"`
		Entries []manifestEntry `json:"entries"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest of %s: %v", dataset, err)
	}
	if m.Version != 1 || m.Dataset != dataset || m.Nodes != nodes {
		t.Fatalf("manifest of %s: version %d dataset %q nodes %d", dataset, m.Version, m.Dataset, m.Nodes)
	}
	for n := 0; n < nodes; n++ {
		if _, err := os.Stat(filepath.Join(prefix, ".scrfs", "manifests", dataset, fmt.Sprintf("node.%d.json", n))); err != nil {
			t.Errorf("part of node %d: %v", n, err)
		}
	}
	out := map[string]manifestEntry{}
	var files, bytes int64
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, e := range m.Entries {
		p := filepath.Join(prefix, dataset, e.Path)
		switch e.Type {
		case "file":
			files++
			bytes += e.Size
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(data)) != e.Size || e.CRC32C != fmt.Sprintf("%08x", crc32.Checksum(data, table)) {
				t.Errorf("%s: size %d crc32c %s in the manifest, %d bytes with crc32c %08x in the prefix",
					e.Path, e.Size, e.CRC32C, len(data), crc32.Checksum(data, table))
			}
		case "symlink":
			if got, _ := os.Readlink(p); got != e.Target {
				t.Errorf("%s: link to %q in the prefix, manifest says %q", e.Path, got, e.Target)
			}
		}
		if e.Type != "dir" {
			if want := owner(e.Path); e.Node != want {
				t.Errorf("%s: flushed by node %d, written on node %d", e.Path, e.Node, want)
			}
			out[e.Path] = e
		}
	}
	if files != m.Files || bytes != m.Bytes {
		t.Errorf("manifest totals %d files %d bytes, entries hold %d and %d", m.Files, m.Bytes, files, bytes)
	}
	return out
}

// writeDataset writes a small tree (files of several sizes, an empty file,
// a subdirectory, a symbolic link) into dataset through n's mount, completes
// it with the marker, and returns its sums as the application sees them.
func writeDataset(t *testing.T, n *Node, dataset string, seed uint64) map[string]string {
	t.Helper()
	writeRandom(t, n.Path(dataset, "a.bin"), 300_000+int64(seed)*1000, seed)
	writeRandom(t, n.Path(dataset, "sub", "b.bin"), 70_001, seed+100)
	writeRandom(t, n.Path(dataset, "sub", "deep", "empty"), 0, 0)
	if err := os.Symlink("a.bin", n.Path(dataset, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.Path(dataset, "COMPLETE"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n.WaitCompleted(10*time.Second, dataset)
	return treeSums(t, n.Path(dataset))
}

// wipe stops nothing: it empties a stopped node's cache and control
// directories, as a job on fresh nodes would find them. The cache
// directory itself stays: it may be a mount of its own.
func wipe(t *testing.T, n *Node) {
	t.Helper()
	must(t, os.RemoveAll(n.Control))
	ents, err := os.ReadDir(n.Cache)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		must(t, os.RemoveAll(filepath.Join(n.Cache, e.Name())))
	}
}

// leftoverTemps lists temporary names a flush left in the prefix.
func leftoverTemps(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(prefix, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), ".scrfs-tmp.") || strings.Contains(d.Name(), ".json.tmp-") {
			out = append(out, p)
		}
		return nil
	})
	must(t, err)
	return out
}

// metric returns the value of a sample line of n's metrics endpoint.
func metric(t *testing.T, n *Node, sample string) float64 {
	t.Helper()
	v, ok := sampleOf(t, n, sample)
	if !ok {
		t.Fatalf("no metric %s", sample)
	}
	return v
}

// metricOr0 is metric for a sample that appears with its first event: 0
// until then.
func metricOr0(t *testing.T, n *Node, sample string) float64 {
	t.Helper()
	v, _ := sampleOf(t, n, sample)
	return v
}

// sampleOf returns the value of a sample line of n's metrics endpoint, and
// whether there is one.
func sampleOf(t *testing.T, n *Node, sample string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + n.Status().Node.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v, true
		}
	}
	return 0, false
}

// TestFlushFetchSingle: one node flushes every second dataset and on
// demand; the prefix holds the very tree the application wrote, with
// manifests and an index that say so; after the cache is wiped the newest
// dataset comes back through the mount, and a corrupt byte makes the next
// restart fall back to the older one and record why.
func TestFlushFetchSingle(t *testing.T) {
	prefix := t.TempDir()
	n := NewNode(t, "SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=2", "SCRFS_METRICS_LISTEN=127.0.0.1:0").Start()
	want1 := writeDataset(t, n, "ckpt.1", 1)
	want2 := writeDataset(t, n, "ckpt.2", 2)

	// The second completed dataset is flushed on its own (flush.every = 2).
	n.WaitFlush(30*time.Second, "ckpt.2", "flushed")
	ix := readPrefixIndex(t, prefix)
	if ix.has("ckpt.1") {
		t.Fatal("ckpt.1 flushed although only every second dataset is")
	}
	e := ix.entry(t, "ckpt.2")
	if e.State != "complete" || e.Nodes != 1 || e.Files != 4 || e.Bytes != 302_000+70_001 || e.Kind != "dir" || e.Root != "ckpt.2" {
		t.Fatalf("index entry of ckpt.2: %+v", e)
	}
	sameSums(t, "flushed ckpt.2", treeSums(t, filepath.Join(prefix, "ckpt.2")), want2)
	checkManifest(t, prefix, "ckpt.2", 1, func(string) int { return 0 })

	// scrfs flush --wait: the newest is flushed already; ckpt.1 on demand.
	if out, errs, code := n.CLI("flush", "--wait"); code != 0 || !strings.Contains(out, "ckpt.2 was flushed already") {
		t.Fatalf("scrfs flush --wait: exit %d: %s%s", code, out, errs)
	}
	out, errs, code := n.CLI("flush", "--wait", "ckpt.1")
	if code != 0 || !strings.Contains(out, "ckpt.1 flushed to "+filepath.Join(prefix, "ckpt.1")) {
		t.Fatalf("scrfs flush --wait ckpt.1: exit %d: %s%s", code, out, errs)
	}
	sameSums(t, "flushed ckpt.1", treeSums(t, filepath.Join(prefix, "ckpt.1")), want1)
	checkManifest(t, prefix, "ckpt.1", 1, func(string) int { return 0 })
	if ix := readPrefixIndex(t, prefix); ix.entry(t, "ckpt.1").State != "complete" || ix.Datasets[0].Name != "ckpt.1" {
		t.Fatalf("index after flushing ckpt.1: %+v", ix.Datasets)
	}
	for _, name := range []string{"ckpt.1", "ckpt.2"} {
		if ds := n.Dataset(name); ds == nil || ds.Flush == nil || ds.Flush.State != "flushed" {
			t.Fatalf("status of %s: %+v", name, ds)
		}
	}
	if _, errs, code := n.CLI("flush", "nope"); code != 6 || !strings.Contains(errs, "nope") {
		t.Fatalf("scrfs flush of a missing dataset: exit %d: %s", code, errs)
	}
	if v := metric(t, n, "scrfs_flush_newest_timestamp_seconds"); v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Fatalf("newest flush timestamp %v", v)
	}
	if v := metric(t, n, `scrfs_flush_rounds_total{op="flush",result="ok"}`); v != 2 {
		t.Fatalf("%v flush rounds, want 2", v)
	}
	if v := metric(t, n, `scrfs_flush_bytes_total{op="flush"}`); v != 301_000+302_000+2*70_001 {
		t.Fatalf("%v bytes flushed", v)
	}

	// scrfs list reads the index without the daemon.
	out, errs, code = n.CLI("list")
	if code != 0 || !strings.Contains(out, "ckpt.1") || !strings.Contains(out, "ckpt.2") || strings.Count(out, "complete") != 2 {
		t.Fatalf("scrfs list: exit %d: %s%s", code, out, errs)
	}
	out, _, _ = n.CLI("list", "--json")
	var listed prefixIndex
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed.Datasets) != 2 {
		t.Fatalf("scrfs list --json: %v\n%s", err, out)
	}

	// Fetch after wiping the cache: the newest comes back, readable.
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	wipe(t, n)
	n.Start()
	n.WaitCompleted(time.Second, "ckpt.2")
	sameSums(t, "ckpt.2 fetched into the mount", treeSums(t, n.Path("ckpt.2")), want2)
	if _, err := os.Stat(n.Path("ckpt.1")); !os.IsNotExist(err) {
		t.Fatalf("ckpt.1 fetched too: %v", err)
	}
	if ds := n.Dataset("ckpt.2"); ds == nil || ds.State != "complete" || ds.Flush == nil || ds.Flush.State != "flushed" {
		t.Fatalf("fetched dataset in status: %+v", ds)
	}
	expectEROFS(t, n.Path("ckpt.2", "a.bin"))

	// A corrupt byte: the fetch of ckpt.2 fails, is recorded, ckpt.1 is used.
	testutil.FlipByte(t, filepath.Join(prefix, "ckpt.2", "sub", "b.bin"), 4242)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	wipe(t, n)
	n.Start()
	n.WaitLog(time.Second, "fetch failed, recorded in the index", "dataset=ckpt.2")
	n.WaitCompleted(time.Second, "ckpt.1")
	sameSums(t, "ckpt.1 fetched into the mount", treeSums(t, n.Path("ckpt.1")), want1)
	if _, err := os.Stat(n.Path("ckpt.2")); !os.IsNotExist(err) {
		t.Fatalf("corrupt ckpt.2 in the mount: %v", err)
	}
	ff := readPrefixIndex(t, prefix).entry(t, "ckpt.2").FailedFetches
	if len(ff) != 1 || ff[0].Node != 0 || !strings.Contains(ff[0].Reason, "corrupt") || !strings.Contains(ff[0].Reason, "b.bin") {
		t.Fatalf("failed fetches of ckpt.2: %+v", ff)
	}
	if out, _, _ := n.CLI("list"); !strings.Contains(out, "ckpt.2: fetch failed on node 0") {
		t.Fatalf("scrfs list does not show the failed fetch:\n%s", out)
	}
	// scr_index --current: a restart may be pinned to a dataset.
	if _, errs, code := n.CLI("list", "--set-current", "ckpt.1"); code != 0 {
		t.Fatalf("scrfs list --set-current: exit %d: %s", code, errs)
	}
	if ix := readPrefixIndex(t, prefix); ix.Current != "ckpt.1" {
		t.Fatalf("current %q", ix.Current)
	}
	if _, errs, code := n.CLI("list", "--set-current", "nope"); code != 6 {
		t.Fatalf("scrfs list --set-current nope: exit %d: %s", code, errs)
	}
}

// TestFetchBadMetadata: a truncated manifest fails its dataset's fetch
// (recorded, older one used); a truncated index makes the daemon start
// empty and say why, and scrfs list report it; nothing panics.
func TestFetchBadMetadata(t *testing.T) {
	prefix, n, want1 := twoFlushed(t)

	truncateHalf(t, filepath.Join(prefix, ".scrfs", "manifests", "ckpt.2", "manifest.json"))
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	wipe(t, n)
	n.Start()
	n.WaitLog(time.Second, "fetch failed, recorded in the index", "dataset=ckpt.2", "corrupt scrfs metadata")
	n.WaitCompleted(time.Second, "ckpt.1")
	sameSums(t, "ckpt.1 fetched", treeSums(t, n.Path("ckpt.1")), want1)
	if ff := readPrefixIndex(t, prefix).entry(t, "ckpt.2").FailedFetches; len(ff) != 1 || !strings.Contains(ff[0].Reason, "manifest.json") {
		t.Fatalf("failed fetches of ckpt.2: %+v", ff)
	}

	index := filepath.Join(prefix, ".scrfs", "index.json")
	truncateHalf(t, index)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	wipe(t, n)
	n.Start()
	n.WaitLog(time.Second, "starting with an empty cache", "the prefix index is unreadable", "corrupt scrfs metadata")
	if st := n.Status(); len(st.Datasets) != 0 {
		t.Fatalf("datasets after an unreadable index: %+v", st.Datasets)
	}
	if _, errs, code := n.CLI("list"); code != 1 || !strings.Contains(errs, index) || !strings.Contains(errs, "corrupt scrfs metadata") {
		t.Fatalf("scrfs list of a truncated index: exit %d: %s", code, errs)
	}
	// The application is not disturbed; flushing says what is wrong.
	writeDataset(t, n, "ckpt.3", 3)
	n.WaitFlush(30*time.Second, "ckpt.3", "flush-failed", "corrupt scrfs metadata")
	if _, errs, code := n.CLI("flush", "--wait", "--force", "ckpt.3"); code != 1 || !strings.Contains(errs, "corrupt scrfs metadata") {
		t.Fatalf("scrfs flush --wait with a truncated index: exit %d: %s", code, errs)
	}
}

// twoFlushed starts a node that flushes every dataset to a new prefix,
// has it flush ckpt.1 and ckpt.2, and returns the prefix, the node and
// ckpt.1's sums.
func twoFlushed(t *testing.T) (string, *Node, map[string]string) {
	t.Helper()
	prefix := t.TempDir()
	n := NewNode(t, "SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=1").Start()
	want1 := writeDataset(t, n, "ckpt.1", 1)
	n.WaitFlush(30*time.Second, "ckpt.1", "flushed")
	writeDataset(t, n, "ckpt.2", 2)
	n.WaitFlush(30*time.Second, "ckpt.2", "flushed")
	return prefix, n, want1
}

func truncateHalf(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// TestFlushKilledMidway: SIGKILL while a throttled flush copies leaves the
// index without the dataset complete and nothing under a final name; the
// restarted daemon redoes the flush to the end.
func TestFlushKilledMidway(t *testing.T) {
	prefix := t.TempDir()
	n := NewNode(t, "SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=0", "SCRFS_FLUSH_BANDWIDTH=8MiB",
		"SCRFS_FLUSH_STREAMS=2").Start()
	for i := range 3 {
		writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 8<<20, uint64(i))
	}
	must(t, os.WriteFile(n.Path("ckpt.1", "COMPLETE"), nil, 0o644))
	n.WaitCompleted(10*time.Second, "ckpt.1")
	want := treeSums(t, n.Path("ckpt.1"))
	if out, errs, code := n.CLI("flush", "ckpt.1"); code != 0 || !strings.Contains(out, "flushing ckpt.1") {
		t.Fatalf("scrfs flush: exit %d: %s%s", code, out, errs)
	}
	testutil.Eventually(t, 20*time.Second, "flush under way", func() bool {
		ds := n.Dataset("ckpt.1")
		return ds != nil && ds.Flush != nil && ds.Flush.State == "flushing" && ds.Flush.DoneBytes > 0
	})
	if ds := n.Dataset("ckpt.1"); ds.Flush.Rate <= 0 || ds.Flush.Rate > 16<<20 || ds.Flush.ETA <= 0 {
		t.Errorf("throttled flush shows rate %v ETA %v", ds.Flush.Rate, ds.Flush.ETA)
	}
	n.Kill()

	ix := readPrefixIndex(t, prefix)
	if e := ix.entry(t, "ckpt.1"); e.State != "flushing" {
		t.Fatalf("index after a kill mid-flush: %+v", e)
	}
	for rel := range want {
		if _, err := os.Lstat(filepath.Join(prefix, "ckpt.1", rel)); err == nil && rel != "COMPLETE" {
			t.Errorf("%s under its final name before the flush completed", rel)
		}
	}

	n.Start()
	n.WaitFlush(60*time.Second, "ckpt.1", "flushed")
	if e := readPrefixIndex(t, prefix).entry(t, "ckpt.1"); e.State != "complete" || e.Files != 4 {
		t.Fatalf("index after the resumed flush: %+v", e)
	}
	sameSums(t, "resumed flush", treeSums(t, filepath.Join(prefix, "ckpt.1")), want)
	if l := leftoverTemps(t, prefix); len(l) > 0 {
		t.Fatalf("temporary files left: %v", l)
	}
}

// TestFlushPrefixUnusable: a full or read-only prefix fails the flush with
// the reason in status, logs and the CLI's exit; the dataset stays in the
// cache and the application writes on.
func TestFlushPrefixUnusable(t *testing.T) {
	t.Run("full", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("a small file system for the prefix needs root (mount -t tmpfs)")
		}
		prefix := testutil.MountTmpfs(t, "size=1m")
		n := NewNode(t, "SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=1").Start()
		writeRandom(t, n.Path("ckpt.1", "big.bin"), 3<<20, 1)
		must(t, os.WriteFile(n.Path("ckpt.1", "COMPLETE"), nil, 0o644))
		n.WaitFlush(30*time.Second, "ckpt.1", "flush-failed", "no space left on device")
		ds := n.Dataset("ckpt.1")
		if ds == nil || ds.Flush == nil || ds.Flush.State != "flush-failed" || !strings.Contains(ds.Flush.Error, "no space left on device") {
			t.Fatalf("status after a full prefix: %+v", ds)
		}
		if fileSum(t, n.Path("ckpt.1", "big.bin")) != fileSum(t, n.CacheDir("ckpt.1", "big.bin")) {
			t.Fatal("dataset damaged in the cache")
		}
		if _, errs, code := n.CLI("flush", "--wait", "ckpt.1"); code != 1 || !strings.Contains(errs, "no space left on device") {
			t.Fatalf("scrfs flush --wait to a full prefix: exit %d: %s", code, errs)
		}
		// The failed flush gave its space back: a small dataset still fits.
		writeDataset(t, n, "ckpt.2", 2)
		n.WaitFlush(30*time.Second, "ckpt.2", "flushed")
		if ix := readPrefixIndex(t, prefix); ix.has("ckpt.1") {
			t.Fatalf("failed flush left in the index: %+v", ix.Datasets)
		}
		if _, err := os.Stat(filepath.Join(prefix, "ckpt.1")); !os.IsNotExist(err) {
			t.Fatalf("failed flush left its files: %v", err)
		}
	})
	t.Run("read-only", func(t *testing.T) {
		var prefix, reason string
		if os.Geteuid() == 0 {
			prefix, reason = testutil.MountTmpfs(t, "ro,size=1m"), "read-only file system"
		} else {
			prefix, reason = t.TempDir(), "permission denied"
			must(t, os.Chmod(prefix, 0o555))
			t.Cleanup(func() { os.Chmod(prefix, 0o755) })
		}
		n := NewNode(t, "SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=0").Start()
		want := writeDataset(t, n, "ckpt.1", 1)
		_, errs, code := n.CLI("flush", "--wait", "ckpt.1")
		if code != 1 || !strings.Contains(errs, reason) || !strings.Contains(errs, prefix) {
			t.Fatalf("scrfs flush --wait to a read-only prefix: exit %d: %s", code, errs)
		}
		n.WaitFlush(time.Second, "ckpt.1", "flush-failed", reason)
		if ds := n.Dataset("ckpt.1"); ds == nil || ds.State != "complete" || ds.Flush.State != "flush-failed" {
			t.Fatalf("status after a read-only prefix: %+v", ds)
		}
		sameSums(t, "dataset after the failed flush", treeSums(t, n.Path("ckpt.1")), want)
		writeRandom(t, n.Path("ckpt.2", "more.bin"), 1<<20, 7)
	})
}

// clusterSums is what every node of c wrote of dataset: the files of its
// own cache directory of it (its mount shows every node's once the dataset
// is complete).
func clusterSums(t *testing.T, c *Cluster, dataset string) []map[string]string {
	t.Helper()
	out := make([]map[string]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = withoutMeta(treeSums(t, n.CacheDir(dataset)))
	}
	return out
}

// union merges the nodes' trees into what the prefix must hold, and
// returns which node wrote each path.
func union(t *testing.T, per []map[string]string) (map[string]string, func(string) int) {
	t.Helper()
	all, owner := map[string]string{}, map[string]int{}
	for i, sums := range per {
		for p, s := range sums {
			if _, dup := all[p]; dup {
				t.Fatalf("%s written on two nodes", p)
			}
			all[p], owner[p] = s, i
		}
	}
	return all, func(p string) int { return owner[p] }
}

// TestFlushFetchCluster: four daemons with XOR flush their own files of a
// dataset into one tree, node 0 records it once all parts are durable; a
// node that is down when a round starts and comes back within
// cluster.connect_timeout takes part in it; after every cache is wiped each
// node fetches its own files back, verified, and redundancy is applied
// again; a corrupt byte in one node's file sends the whole job back to the
// older dataset.
func TestFlushFetchCluster(t *testing.T) {
	prefix := t.TempDir()
	c := NewCluster(t, 4, "SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=2",
		"SCRFS_DATASETS_COMPLETE=marker:COMPLETE").Start()
	complete := func(dataset string) {
		t.Helper()
		must(t, os.WriteFile(c.Nodes[1].Path(dataset, "COMPLETE"), nil, 0o644))
		c.WaitState(60*time.Second, dataset, "protected")
	}
	writeNodeData(t, c, "ckpt.1")
	complete("ckpt.1")
	sums1 := clusterSums(t, c, "ckpt.1")
	for i, n := range c.Nodes[1:] {
		writeRandom(t, n.Path("ckpt.2", fmt.Sprintf("rank_%d", i+1), "state.bin"), int64(50_000*(i+1)), uint64(1000+i))
	}
	complete("ckpt.2")
	sums2 := clusterSums(t, c, "ckpt.2")

	// Every second settled dataset is flushed; every node hears the outcome.
	c.WaitFlush(60*time.Second, "ckpt.2", "flushed")
	all2, owner2 := union(t, sums2)
	sameSums(t, "flushed ckpt.2", treeSums(t, filepath.Join(prefix, "ckpt.2")), all2)
	checkManifest(t, prefix, "ckpt.2", 4, owner2)
	if e := readPrefixIndex(t, prefix).entry(t, "ckpt.2"); e.State != "complete" || e.Nodes != 4 || e.Files != int64(len(all2)) {
		t.Fatalf("index entry of ckpt.2: %+v", e)
	}

	// On demand from node 3, with node 2 killed and restarted meanwhile:
	// node 0 waits for it, it redoes its part, the round completes.
	c.Nodes[2].Kill()
	done := make(chan struct{})
	var out, errs string
	var code int
	go func() {
		defer close(done)
		out, errs, code = c.Nodes[3].CLI("flush", "--wait", "ckpt.1")
	}()
	c.Nodes[0].WaitLog(30*time.Second, "flush started", "dataset=ckpt.1")
	c.Nodes[2].Start()
	<-done
	if code != 0 || !strings.Contains(out, "ckpt.1 flushed to") {
		t.Fatalf("scrfs flush --wait ckpt.1 on node 3: exit %d: %s%s", code, out, errs)
	}
	all1, owner1 := union(t, sums1)
	sameSums(t, "flushed ckpt.1", treeSums(t, filepath.Join(prefix, "ckpt.1")), all1)
	checkManifest(t, prefix, "ckpt.1", 4, owner1)
	if l := leftoverTemps(t, prefix); len(l) > 0 {
		t.Fatalf("temporary files left: %v", l)
	}
	if out, _, code := c.Nodes[2].CLI("list"); code != 0 || strings.Count(out, "complete") != 2 {
		t.Fatalf("scrfs list on node 2: exit %d\n%s", code, out)
	}

	// Wipe every cache: each node fetches its own files of the newest.
	restartWiped := func() {
		t.Helper()
		for _, n := range c.Nodes {
			if err := n.Stop(); err != nil {
				t.Fatal(err)
			}
			wipe(t, n)
		}
		c.Start()
	}
	restartWiped()
	c.WaitCompleted(time.Second, "ckpt.2")
	for i, n := range c.Nodes {
		sameSums(t, fmt.Sprintf("ckpt.2 fetched on node %d", i), withoutMeta(treeSums(t, n.CacheDir("ckpt.2"))), sums2[i])
	}
	c.WaitState(60*time.Second, "ckpt.2", "protected")
	for i, n := range c.Nodes {
		sameSums(t, fmt.Sprintf("ckpt.2 through node %d's mount", i), treeSums(t, n.Path("ckpt.2")), all2)
	}

	// A corrupt byte in node 2's file fails ckpt.2 for the whole job.
	testutil.FlipByte(t, filepath.Join(prefix, "ckpt.2", "rank_2", "state.bin"), 777)
	restartWiped()
	c.Nodes[0].WaitLog(time.Second, "fetch failed, recorded in the index", "dataset=ckpt.2", "failed_node=2")
	c.WaitCompleted(time.Second, "ckpt.1")
	for i, n := range c.Nodes {
		sameSums(t, fmt.Sprintf("ckpt.1 fetched on node %d", i), withoutMeta(treeSums(t, n.CacheDir("ckpt.1"))), sums1[i])
		if _, err := os.Stat(n.Path("ckpt.2")); !os.IsNotExist(err) {
			t.Fatalf("node %d shows the failed ckpt.2: %v", i, err)
		}
	}
	ff := readPrefixIndex(t, prefix).entry(t, "ckpt.2").FailedFetches
	if len(ff) != 1 || ff[0].Node != 2 || !strings.Contains(ff[0].Reason, "state.bin") {
		t.Fatalf("failed fetches of ckpt.2: %+v", ff)
	}
}

// TestFlushNodeLost: a node that dies for good during a round fails the
// flush after cluster.connect_timeout, named in the reason; the others keep
// the dataset and the prefix does not claim it.
func TestFlushNodeLost(t *testing.T) {
	prefix := t.TempDir()
	c := NewCluster(t, 3, "SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=0", "SCRFS_REDUNDANCY_SCHEME=single",
		"SCRFS_CLUSTER_CONNECT_TIMEOUT=2s").Start()
	for i, n := range c.Nodes {
		writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 100_000, uint64(i))
	}
	must(t, os.WriteFile(c.Nodes[0].Path("ckpt.1", "COMPLETE"), nil, 0o644))
	c.WaitCompleted(10*time.Second, "ckpt.1")
	c.Nodes[2].Kill()
	start := time.Now()
	_, errs, code := c.Nodes[1].CLI("flush", "--wait", "ckpt.1")
	if code != 1 || !strings.Contains(errs, "node 2 unreachable") {
		t.Fatalf("flush with node 2 gone: exit %d: %s", code, errs)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the round took %v to give up on a dead node", took)
	}
	for _, n := range c.Nodes[:2] {
		n.WaitFlush(5*time.Second, "ckpt.1", "flush-failed", "node 2 unreachable")
		if ds := n.Dataset("ckpt.1"); ds == nil || ds.Flush == nil || ds.Flush.State != "flush-failed" {
			t.Fatalf("status after the lost node: %+v", ds)
		}
	}
	// The round fails before it touches the prefix (node 2 cannot stop an
	// earlier copy it might run), so there may be no index at all.
	if _, err := os.Stat(filepath.Join(prefix, ".scrfs", "index.json")); err == nil {
		if ix := readPrefixIndex(t, prefix); ix.has("ckpt.1") && ix.entry(t, "ckpt.1").State == "complete" {
			t.Fatalf("index claims ckpt.1 without node 2's files: %+v", ix.entry(t, "ckpt.1"))
		}
	}
}

// TestFlushCoordinatorKilled: node 0 dies mid-round while node 1 copies;
// the index never claims the dataset, and node 0 redoes the round after its
// restart with node 1 taking part again.
func TestFlushCoordinatorKilled(t *testing.T) {
	prefix := t.TempDir()
	c := NewCluster(t, 2, "SCRFS_PATHS_PREFIX="+prefix, "SCRFS_FLUSH_EVERY=1", "SCRFS_FLUSH_BANDWIDTH=8MiB",
		"SCRFS_DATASETS_COMPLETE=marker:COMPLETE").Start()
	for i, n := range c.Nodes {
		writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 12<<20, uint64(i))
	}
	must(t, os.WriteFile(c.Nodes[0].Path("ckpt.1", "COMPLETE"), nil, 0o644))
	sums := clusterSums(t, c, "ckpt.1")
	testutil.Eventually(t, 60*time.Second, "node 1 flushing", func() bool {
		ds := c.Nodes[1].Dataset("ckpt.1")
		return ds != nil && ds.Flush != nil && ds.Flush.State == "flushing" && ds.Flush.DoneBytes > 0
	})
	c.Nodes[0].Kill()
	if e := readPrefixIndex(t, prefix).entry(t, "ckpt.1"); e.State != "flushing" {
		t.Fatalf("index with the coordinator killed mid-flush: %+v", e)
	}
	c.Nodes[0].Start()
	c.WaitFlush(60*time.Second, "ckpt.1", "flushed")
	all, owner := union(t, sums)
	sameSums(t, "flush redone after the coordinator's restart", treeSums(t, filepath.Join(prefix, "ckpt.1")), all)
	checkManifest(t, prefix, "ckpt.1", 2, owner)
	if e := readPrefixIndex(t, prefix).entry(t, "ckpt.1"); e.State != "complete" || e.Nodes != 2 {
		t.Fatalf("index after the redone round: %+v", e)
	}
	if l := leftoverTemps(t, prefix); len(l) > 0 {
		t.Fatalf("temporary files left: %v", l)
	}
}
