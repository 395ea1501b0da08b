package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/scrfs/scrfs/internal/testutil"
)

// A package main's frames are named main.f: its goroutines are told by
// the directory of their files.
func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "/bench/redbench/") }

// TestSchemeTraffic checks the traffic model against the rules of
// docs/formats-redundancy.md: what each member sends in all, to whom, and
// that every byte sent is received by a member that stores it.
func TestSchemeTraffic(t *testing.T) {
	for _, p := range []int{3, 4, 5, 8} {
		for _, b := range []int64{1, 1000, 1<<20 + 3} {
			for _, sch := range []scheme{{kind: "partner", replicas: 1}, {kind: "partner", replicas: p - 1}, {kind: "xor"}, {kind: "rs", parity: 1}, {kind: "rs", parity: 2}} {
				tr := schemeTraffic(sch, p, b)
				var want int64
				switch sch.kind {
				case "partner":
					want = int64(sch.replicas) * b
				case "xor":
					want = int64(p-1) * ceilDiv(b, int64(p-1))
				case "rs":
					want = int64((p-sch.parity)*sch.parity) * ceilDiv(b, int64(p-sch.parity))
				}
				for q := range p {
					if tr[q][q] != 0 {
						t.Errorf("%s p=%d: member %d sends itself %d bytes", sch, p, q, tr[q][q])
					}
					if got := tr.sent(q); got != want {
						t.Errorf("%s p=%d B=%d: member %d sends %d, want %d", sch, p, b, q, got, want)
					}
					var recv int64
					for src := range p {
						recv += tr[src][q]
					}
					// Every member stores as much as any other (r copies,
					// one XOR chunk, k checksums), fed by the same amount.
					if recv != want {
						t.Errorf("%s p=%d B=%d: member %d receives %d, want %d", sch, p, b, q, recv, want)
					}
				}
				if sch.kind == "xor" || (sch.kind == "partner" && sch.replicas == 1) {
					for q := range p {
						if tr[q][(q+1)%p] != want {
							t.Errorf("%s p=%d: member %d does not send everything to its right neighbour: %v", sch, p, q, tr[q])
						}
					}
				}
			}
		}
	}
}

// TestRSTrafficPattern follows the RS rule by hand for p=4, k=2: member 0
// holds checksums 0 and 1 of rows 0 and 1, so it contributes data to rows
// 2 and 3; row 2's checksums are held by members 2 and 1, row 3's by 3 and
// 2. Member 0 thus sends one chunk to 1, two to 2 and one to 3.
func TestRSTrafficPattern(t *testing.T) {
	const b = 4 << 20
	c := int64(b / 2)
	tr := schemeTraffic(scheme{kind: "rs", parity: 2}, 4, b)
	want := []int64{0, c, 2 * c, c}
	for d, v := range want {
		if tr[0][d] != v {
			t.Fatalf("member 0 → %d: %d bytes, want %d (row %v)", d, tr[0][d], v, tr[0])
		}
	}
}

func TestParseSchemes(t *testing.T) {
	got, err := parseSchemes("partner, xor,rs", 4, 1, 2)
	if err != nil || len(got) != 3 || got[2].String() != "rs(k=2)" || got[0].String() != "partner(r=1)" {
		t.Fatalf("parseSchemes: %v, %v", got, err)
	}
	for _, bad := range []struct {
		list                string
		nodes, repl, parity int
	}{{"raid5", 4, 1, 2}, {"partner", 4, 4, 2}, {"rs", 4, 1, 4}, {"rs", 3, 1, 0}, {"", 4, 1, 2}} {
		if _, err := parseSchemes(bad.list, bad.nodes, bad.repl, bad.parity); err == nil {
			t.Errorf("parseSchemes(%q, nodes %d, r %d, k %d) accepted", bad.list, bad.nodes, bad.repl, bad.parity)
		}
	}
	if l := (scheme{kind: "rs", parity: 2}).losses(); len(l) != 2 || l[1] != 2 {
		t.Errorf("rs(k=2) losses %v, want [1 2]", l)
	}
}

// TestPayload: a file written is verified; one changed byte, a missing
// byte or another node's file is not.
func TestPayload(t *testing.T) {
	dir := t.TempDir()
	p := newPayload(2)
	const size = 3*ioSize + 12345
	for q := range 2 {
		if err := p.write(filepath.Join(dir, fileName(q)), q, size); err != nil {
			t.Fatal(err)
		}
		if err := p.verify(filepath.Join(dir, fileName(q)), q, size); err != nil {
			t.Fatalf("node %d: %v", q, err)
		}
	}
	if err := p.verify(filepath.Join(dir, fileName(1)), 0, size); !errors.Is(err, errMismatch) {
		t.Fatalf("node 1's file passed as node 0's: %v", err)
	}
	path := filepath.Join(dir, fileName(0))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff ^ readByte(t, path, 2*ioSize+7)}, 2*ioSize+7)
	f.Close()
	if err := p.verify(path, 0, size); !errors.Is(err, errMismatch) {
		t.Fatalf("flipped byte: %v", err)
	}
	// Rewriting restores it (the recorded sum is kept, not recomputed).
	if err := p.write(path, 0, size); err != nil {
		t.Fatal(err)
	}
	os.Truncate(path, size-1)
	if err := p.verify(path, 0, size); !errors.Is(err, errMismatch) {
		t.Fatalf("truncated: %v", err)
	}
	if err := p.verify(path, 0, 99); err == nil {
		t.Fatal("verified a size never written")
	}
}

func readByte(t *testing.T, path string, off int64) byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b[0]
}

// TestReadsStores: a member reads its whole logical file (plus at most the
// padding of its last chunk) and stores what docs/formats-redundancy.md
// lists as its segments.
func TestReadsStores(t *testing.T) {
	const p, b = 5, 1<<20 + 1
	for _, sch := range []scheme{{kind: "partner", replicas: 2}, {kind: "xor"}, {kind: "rs", parity: 2}} {
		if r := sch.reads(p, b); r < b || r >= b+p {
			t.Errorf("%s reads %d of %d", sch, r, b)
		}
	}
	if got := (scheme{kind: "partner", replicas: 2}).stores(p, b); got != 2*b {
		t.Errorf("partner(r=2) stores %d, want two copies", got)
	}
	if got := (scheme{kind: "xor"}).stores(p, b); got != (b+p-2)/(p-1) {
		t.Errorf("xor stores %d, want one chunk", got)
	}
	if got := (scheme{kind: "rs", parity: 2}).stores(p, b); got != 2*((b+p-3)/(p-2)) {
		t.Errorf("rs(k=2) stores %d, want two chunks", got)
	}
}

func TestLinkFlag(t *testing.T) {
	for _, rate := range []string{"2gbit", "500mbit", "1.5gbit", "100kbit"} {
		if o, err := parseFlags([]string{"-link", rate}, io.Discard); err != nil || o.link != rate {
			t.Errorf("-link %s: %+v, %v", rate, o.link, err)
		}
	}
	for _, rate := range []string{"2G", "gbit", "0gbit", "2 gbit", "-1mbit", "2gbit; reboot"} {
		if _, err := parseFlags([]string{"-link", rate}, io.Discard); err == nil {
			t.Errorf("-link %q accepted", rate)
		}
	}
}

// TestFetchFlagsAndTargets: -fetch and -disk parse, and the rebuild
// targets are issue 15's where it sets them, issue 4's otherwise.
func TestFetchFlagsAndTargets(t *testing.T) {
	o, err := parseFlags([]string{"-fetch=false", "-disk", "/var/tmp"}, io.Discard)
	if err != nil || o.fetch || o.disk != "/var/tmp" {
		t.Fatalf("parseFlags: %+v, %v", o, err)
	}
	if o, _ := parseFlags(nil, io.Discard); !o.fetch || o.disk != "/tmp" {
		t.Fatalf("defaults: fetch %v, disk %q", o.fetch, o.disk)
	}
	for _, c := range []struct {
		kind string
		lost int
		want float64
	}{{"partner", 1, 0.6}, {"xor", 1, 0.6}, {"rs", 1, targetRebuild}, {"rs", 2, 1.0}, {"rs", 3, 0}} {
		if got := rebuildTarget(c.kind, c.lost); got != c.want {
			t.Errorf("rebuildTarget(%s, %d) = %v, want %v", c.kind, c.lost, got, c.want)
		}
	}
}

// TestABFlags: -ab takes B's binary, -ab-set B's own settings (and only
// with -ab); the report's ratio is the median of per-round pairs.
func TestABFlags(t *testing.T) {
	o, err := parseFlags([]string{"-ab", "/tmp/b", "-ab-set", "SCRFS_REDUNDANCY_PIECE_SIZE=1MiB", "-ab-set", "SCRFS_ZEROCOPY=0"}, io.Discard)
	if err != nil || o.ab != "/tmp/b" || len(o.abSettings) != 2 || o.abSettings[1] != "SCRFS_ZEROCOPY=0" {
		t.Fatalf("parseFlags: %+v, %v", o, err)
	}
	if _, err := parseFlags([]string{"-ab-set", "SCRFS_ZEROCOPY=0"}, io.Discard); err == nil {
		t.Error("-ab-set without -ab accepted")
	}
	if _, err := parseFlags([]string{"-ab", "/tmp/b", "-ab-set", "ZEROCOPY=0"}, io.Discard); err == nil {
		t.Error("-ab-set without the SCRFS_ prefix accepted")
	}
	if got := median([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Errorf("median = %v, want 2.5", got)
	}
}
