package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// A package main's frames are named main.f: its goroutines are told by
// the directory of their files.
func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "/bench/nsbench/") }

func TestFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.nodes != 4 || o.size != 1<<30 || o.shard != 256<<20 || o.files != 10000 || !slices.Equal(o.scale, []int{4, 8, 16, 32}) ||
		!slices.Equal(o.only, measurements) || o.scheme != "xor" || o.fileSize != 4<<10 {
		t.Fatalf("defaults: %+v", o)
	}
	o, err = parseFlags([]string{"-only", "list, scale", "-scale", "4,8", "-size", "64MiB", "-set", "SCRFS_LOG_LEVEL=debug"}, io.Discard)
	if err != nil || !o.does("list") || o.does("remote") || o.size != 64<<20 || len(o.settings) != 1 {
		t.Fatalf("parseFlags: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"-nodes", "2"}, {"-only", "remote,nosuch"}, {"-scale", "4,x"}, {"-scale", "1"},
		{"-size", "0"}, {"-shard", "1"}, {"-scheme", "raid6"}, {"-scheme", "single"}, {"-rounds", "0"}, {"-set", "LOG=1"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestPlan: loaded by the world that saved it, every rank reads
// .metadata, the replicated file and its own shard; resharded, the ranks'
// slices cover every shard exactly once.
func TestPlan(t *testing.T) {
	l := dcpLayout{shards: 4, shard: 1000003, replicated: 77, metadata: 5}
	for g := range 4 {
		ops := l.plan(g, 4)
		want := []readOp{{".metadata", 0, 5}, {"replicated.distcp", 0, 77}, {shardName(g), 0, 1000003}}
		if !slices.Equal(ops, want) {
			t.Fatalf("rank %d: %v", g, ops)
		}
	}
	for _, world := range []int{2, 3} {
		covered := map[string]int64{}
		next := map[string]int64{}
		for g := range world {
			ops := l.plan(g, world)
			if ops[0].file != ".metadata" || ops[1].file != "replicated.distcp" || len(ops) != 2+l.shards {
				t.Fatalf("world %d rank %d: %v", world, g, ops)
			}
			for _, op := range ops[2:] {
				if op.offset != next[op.file] {
					t.Fatalf("world %d rank %d reads %s from %d, the previous rank stopped at %d", world, g, op.file, op.offset, next[op.file])
				}
				next[op.file] = op.offset + op.bytes
				covered[op.file] += op.bytes
			}
		}
		for s := range l.shards {
			if covered[shardName(s)] != l.shard {
				t.Fatalf("world %d: %s read %d of %d bytes", world, shardName(s), covered[shardName(s)], l.shard)
			}
		}
	}
	if f := l.files(0); len(f) != 2 || f["replicated.distcp"] != 77 || f[shardName(0)] != l.shard {
		t.Fatalf("rank 0 writes %v", f)
	}
	if f := l.files(3); len(f) != 1 || f[shardName(3)] != l.shard {
		t.Fatalf("rank 3 writes %v", f)
	}
}

// TestWriteAndRead: write makes every file and then the marker; the
// readers read what was written, and fail on a short file.
func TestWriteAndRead(t *testing.T) {
	b := &bench{buf: payload()}
	root := t.TempDir()
	files := listFiles(25, 4, 10)
	files["big/one"] = 3*ioSize + 7
	if err := b.write(root, files, "COMPLETE"); err != nil {
		t.Fatal(err)
	}
	d, err := walk(root, 25+4+2+1)
	if err != nil || d <= 0 {
		t.Fatalf("walk: %v, %v", d, err)
	}
	if _, err := walk(root, 25); err == nil {
		t.Fatal("walk accepted the wrong count")
	}
	buf := make([]byte, ioSize)
	total, open, err := timedRead(filepath.Join(root, "big/one"), 3*ioSize+7, buf)
	if err != nil || total < open {
		t.Fatalf("timedRead: %v %v %v", total, open, err)
	}
	if _, _, err := timedRead(filepath.Join(root, "big/one"), 3*ioSize+8, buf); err == nil {
		t.Fatal("timedRead accepted a short file")
	}
	if err := readRange(filepath.Join(root, "big/one"), ioSize+5, 2*ioSize+2, buf); err != nil {
		t.Fatal(err)
	}
	if err := readRange(filepath.Join(root, "big/one"), ioSize+5, 2*ioSize+3, buf); err == nil {
		t.Fatal("readRange read past the end")
	}
	if _, err := os.Stat(filepath.Join(root, "COMPLETE")); err != nil {
		t.Fatal(err)
	}
	if len(listFiles(10000, 100, 1)) != 10000 {
		t.Fatal("listFiles")
	}
}

// TestLoad runs both loads of a small DCP layout from one directory.
func TestLoad(t *testing.T) {
	b := &bench{buf: payload()}
	l := dcpLayout{shards: 3, shard: 2*ioSize + 1, replicated: 100, metadata: 10}
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := b.writeDCP(nil, dir, l, 1); err != nil {
		t.Fatal(err)
	}
	bufs := [][]byte{make([]byte, ioSize), make([]byte, ioSize), make([]byte, ioSize)}
	for _, world := range []int{3, reshardWorld} {
		if _, err := load(l, world, func(int) string { return dir }, bufs); err != nil {
			t.Fatalf("world %d: %v", world, err)
		}
	}
	os.Remove(filepath.Join(dir, shardName(2)))
	if _, err := load(l, 3, func(int) string { return dir }, bufs); err == nil || !strings.Contains(err.Error(), "rank 2") {
		t.Fatalf("a missing shard: %v", err)
	}
}

func TestLoadSeconds(t *testing.T) {
	if d, err := loadSeconds("warning: x\nload_seconds 1.250000\nok\n"); err != nil || d != 1250*time.Millisecond {
		t.Fatalf("%v, %v", d, err)
	}
	if d, err := loadSeconds("ok\n"); err != nil || d != 0 {
		t.Fatalf("a save: %v, %v", d, err)
	}
	for _, bad := range []string{"", "load_seconds 1\n", "load_seconds x\nok", "load_seconds -1\nok", "ok\nTraceback"} {
		if _, err := loadSeconds(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRatios(t *testing.T) {
	s := func(v ...float64) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x*float64(time.Second)))
		}
		return out
	}
	m, lo, hi := ratio(s(2, 3, 10), s(1, 1, 2))
	if m != 3 || lo != 2 || hi != 5 {
		t.Fatalf("ratio: %v %v %v", m, lo, hi)
	}
	if m, _, _ := ratio(nil, s(1)); m != 0 {
		t.Fatal("ratio of nothing")
	}
	if verdict(0.9, 0.8, true) != "met" || verdict(0.7, 0.8, true) != "MISSED" || verdict(1.4, 1.5, false) != "met" ||
		verdict(1.6, 1.5, false) != "MISSED" || verdict(0, 1, false) != "not measured" {
		t.Fatal("verdict")
	}
	if got := fmtBytesList([]int64{1 << 30, 1 << 20, 1 << 30}); got != "1 MiB, 1 GiB" {
		t.Fatalf("fmtBytesList: %q", got)
	}
}

// TestScaleCounts: requests per node per dataset, node 0 apart from the
// others.
func TestScaleCounts(t *testing.T) {
	r := &scaleResult{nodes: 4, datasets: 2, reqs: []map[string]float64{
		{"share": 6, "record": 6, "began": 6}, {"share": 2, "record": 2}, {"share": 2, "record": 2, "ready": 4}, {"share": 2, "record": 2},
	}}
	if r.perNode(0) != 9 || r.perNode(2) != 4 {
		t.Fatalf("perNode: %v %v", r.perNode(0), r.perNode(2))
	}
	if med, most := r.others(); med != 2 || most != 4 {
		t.Fatalf("others: %v %v", med, most)
	}
}

func TestWalkErrors(t *testing.T) {
	if _, err := walk(filepath.Join(t.TempDir(), "none"), 0); err == nil {
		t.Fatal("walk of nothing")
	}
	if ok, err := lists(filepath.Join(t.TempDir(), "none"), 1); ok || err != nil {
		t.Fatalf("lists of a missing directory: %v, %v", ok, err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), nil, 0o644)
	if ok, err := lists(dir, 1); !ok || err != nil {
		t.Fatalf("lists: %v, %v", ok, err)
	}
}
