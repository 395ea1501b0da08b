package schemes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/klauspost/reedsolomon"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/redfile"
)

// The reference implementation below is deliberately naive: it builds every
// member's logical file in memory, lays out the rows as the seed document
// describes them (counting chunk positions, not using the package's index
// helpers), and computes parity row by row on whole rows.

// refRows returns, for member q, the logical chunk index of each row, or -1
// where q's row is zero (XOR: its own row; RS: rows where it holds a
// checksum). Data chunks fill the remaining rows in ascending order.
func refRows(q, p int, zero func(row int) bool) []int {
	rows := make([]int, p)
	next := 0
	for j := 0; j < p; j++ {
		if zero(j) {
			rows[j] = -1
			continue
		}
		rows[j] = next
		next++
	}
	return rows
}

func padTo(b []byte, n int64) []byte {
	out := make([]byte, n)
	copy(out, b)
	return out
}

// refXOR returns the chunk size and each member's expected parity.
func refXOR(logicals [][]byte) (int64, [][]byte) {
	p := len(logicals)
	var maxLen int64
	for _, l := range logicals {
		maxLen = max(maxLen, int64(len(l)))
	}
	chunk := max((maxLen+int64(p-2))/int64(p-1), 1)
	parity := make([][]byte, p)
	for r := range parity {
		parity[r] = make([]byte, chunk)
	}
	for q, l := range logicals {
		full := padTo(l, int64(p-1)*chunk)
		rows := refRows(q, p, func(j int) bool { return j == q })
		for j, idx := range rows {
			if idx < 0 {
				continue
			}
			for b := int64(0); b < chunk; b++ {
				parity[j][b] ^= full[int64(idx)*chunk+b]
			}
		}
	}
	return chunk, parity
}

// refRS returns the chunk size and parity[member][checksum].
func refRS(t testing.TB, logicals [][]byte, k int) (int64, [][][]byte) {
	p := len(logicals)
	var maxLen int64
	for _, l := range logicals {
		maxLen = max(maxLen, int64(len(l)))
	}
	chunk := max((maxLen+int64(p-k-1))/int64(p-k), 1)
	enc, err := reedsolomon.New(p, k)
	if err != nil {
		t.Fatal(err)
	}
	rowsOf := make([][]int, p)
	fulls := make([][]byte, p)
	for q := range logicals {
		fulls[q] = padTo(logicals[q], int64(p-k)*chunk)
		rowsOf[q] = refRows(q, p, func(j int) bool { return (j-q+p)%p < k })
	}
	parity := make([][][]byte, p)
	for r := range parity {
		parity[r] = make([][]byte, k)
	}
	for j := 0; j < p; j++ {
		shards := make([][]byte, p+k)
		for q := 0; q < p; q++ {
			if idx := rowsOf[q][j]; idx >= 0 {
				shards[q] = fulls[q][int64(idx)*chunk : int64(idx+1)*chunk]
			} else {
				shards[q] = make([]byte, chunk)
			}
		}
		for i := 0; i < k; i++ {
			shards[p+i] = make([]byte, chunk)
		}
		if err := enc.Encode(shards); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < k; i++ {
			parity[(j-i+p)%p][i] = shards[p+i]
		}
	}
	return chunk, parity
}

// setShape is one member-by-member dataset layout for a test set.
type setShape []spec

// shapes returns dataset layouts for a set of size p: uneven file counts and
// sizes, a member with no files, 0-byte files, sizes that are multiples of
// nothing in particular.
func shapes(p int, short bool) map[string]setShape {
	maxSize := int64(9000)
	if short {
		maxSize = 3000
	}
	out := map[string]setShape{}
	uneven := make(setShape, p)
	for r := range uneven {
		uneven[r] = spec{files: 1 + (r*3)%5, maxSize: maxSize + int64(r)*777, extras: r%2 == 0}
	}
	out["uneven"] = uneven
	withEmpty := make(setShape, p)
	for r := range withEmpty {
		withEmpty[r] = spec{files: 2 + r, maxSize: maxSize / 3, extras: true}
	}
	withEmpty[p/2] = spec{} // a member with no files at all
	out["empty-member"] = withEmpty
	allEmpty := make(setShape, p)
	for r := range allEmpty {
		allEmpty[r] = spec{files: 1, maxSize: 0, extras: r == 0}
	}
	out["all-empty"] = allEmpty
	return out
}

func (ts *testSet) fillShape(sh setShape, seed uint64) {
	for r, sp := range sh {
		fill(ts.t, ts.dirs[r], seed*31+uint64(r), sp)
	}
}

func TestEncodeMatchesReference(t *testing.T) {
	type cfg struct {
		kind Kind
		p, k int
	}
	var cfgs []cfg
	for p := 2; p <= 6; p++ {
		cfgs = append(cfgs, cfg{kind: XOR, p: p})
		for k := 1; k < p && k <= 3; k++ {
			cfgs = append(cfgs, cfg{kind: RS, p: p, k: k})
		}
	}
	if !testing.Short() {
		cfgs = append(cfgs, cfg{kind: RS, p: 12, k: 4}, cfg{kind: XOR, p: 12}, cfg{kind: RS, p: 16, k: 1})
	}
	piecesFor := []int{64, 1000, 4096}
	if testing.Short() {
		piecesFor = []int{1000}
	}
	for _, c := range cfgs {
		for _, piece := range piecesFor {
			for shapeName, sh := range shapes(c.p, testing.Short()) {
				name := fmt.Sprintf("%s/p=%d/k=%d/piece=%d/%s", c.kind, c.p, c.k, piece, shapeName)
				t.Run(name, func(t *testing.T) {
					params := Params{Kind: c.kind, Size: c.p, Parity: c.k, PieceSize: piece}
					ts := newTestSet(t, params)
					ts.fillShape(sh, uint64(c.p*10+c.k))
					logicals := make([][]byte, c.p)
					for r := range logicals {
						logicals[r] = logicalBytes(t, ts.dirs[r])
					}
					ms := ts.listAll()
					ts.mustEncodeAs(ms)
					checkEncoded(t, ts, ms, logicals)
				})
			}
		}
	}
}

// checkEncoded compares every member's redundancy file with the reference,
// the members ms having been encoded.
func checkEncoded(t *testing.T, ts *testSet, ms []Member, logicals [][]byte) {
	t.Helper()
	p := ts.p
	switch p.Kind {
	case XOR:
		chunk, parity := refXOR(logicals)
		for r := 0; r < p.Size; r++ {
			h := mustHeader(t, ts.redPath(r))
			if h.Chunk != chunk {
				t.Fatalf("rank %d: chunk %d, reference %d", r, h.Chunk, chunk)
			}
			if got := readSegment(t, ts.redPath(r), 0); !bytes.Equal(got, parity[r]) {
				t.Errorf("rank %d: xor parity differs from reference (first diff at %d)", r, firstDiff(got, parity[r]))
			}
		}
	case RS:
		chunk, parity := refRS(t, logicals, p.Parity)
		for r := 0; r < p.Size; r++ {
			h := mustHeader(t, ts.redPath(r))
			if h.Chunk != chunk {
				t.Fatalf("rank %d: chunk %d, reference %d", r, h.Chunk, chunk)
			}
			for i := 0; i < p.Parity; i++ {
				if got := readSegment(t, ts.redPath(r), i); !bytes.Equal(got, parity[r][i]) {
					t.Errorf("rank %d checksum %d: differs from reference (first diff at %d)", r, i, firstDiff(got, parity[r][i]))
				}
			}
		}
	case Partner:
		for r := 0; r < p.Size; r++ {
			for d := 1; d <= p.Replicas; d++ {
				src := (r - d + p.Size) % p.Size
				if got := readSegment(t, ts.redPath(r), d-1); !bytes.Equal(got, logicals[src]) {
					t.Errorf("rank %d: copy of rank %d differs", r, src)
				}
			}
		}
	}
	checkHeaders(t, ts, ms, logicals)
}

// checkHeaders checks that every header records its own metadata, as the
// encode of ms was given it (with the right CRCs), and exactly its
// neighbours' own records.
func checkHeaders(t *testing.T, ts *testSet, ms []Member, logicals [][]byte) {
	t.Helper()
	own := make([]redfile.MemberMeta, ts.p.Size)
	for r := range own {
		h := mustHeader(t, ts.redPath(r))
		if h.Rank != r || h.Dataset != ts.name || h.Group != ts.set.Group || h.Groups != ts.set.Groups {
			t.Fatalf("rank %d header identity: %+v", r, h)
		}
		own[r] = h.Members[0]
		list := ms[r].Files
		if len(list) != len(own[r].Files) {
			t.Fatalf("rank %d: header has %d files, the list %d", r, len(own[r].Files), len(list))
		}
		var at int64
		for i, f := range own[r].Files {
			g := list[i]
			g.HasCRC, g.CRC32C = f.HasCRC, f.CRC32C
			if !reflect.DeepEqual(g, f) {
				t.Errorf("rank %d file %d: header %+v, listed %+v", r, i, f, list[i])
			}
			if f.Type == files.Regular {
				want := crc32c.Checksum(logicals[r][at : at+f.Size])
				if ts.p.Kind != Single && (!f.HasCRC || f.CRC32C != want) {
					t.Errorf("rank %d %s: crc %08x (has %v), want %08x", r, f.Path, f.CRC32C, f.HasCRC, want)
				}
				at += f.Size
			}
		}
	}
	for r := range own {
		h := mustHeader(t, ts.redPath(r))
		for i, q := range ts.p.recorded(r) {
			a, _ := json.Marshal(h.Members[i+1])
			b, _ := json.Marshal(own[q])
			if !bytes.Equal(a, b) {
				t.Errorf("rank %d: record of rank %d differs from its own header", r, q)
			}
		}
	}
}

func mustHeader(t testing.TB, path string) *redfile.Header {
	t.Helper()
	h, err := redfile.ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestEncodePartnerAndSingle(t *testing.T) {
	cases := []Params{
		{Kind: Single, Size: 1},
		{Kind: Single, Size: 3},
		{Kind: Partner, Size: 2, Replicas: 1},
		{Kind: Partner, Size: 4, Replicas: 1},
		{Kind: Partner, Size: 4, Replicas: 2},
		{Kind: Partner, Size: 5, Replicas: 4},
	}
	for _, params := range cases {
		for _, piece := range []int{100, 4096} {
			params.PieceSize = piece
			t.Run(fmt.Sprintf("%s/p=%d/r=%d/piece=%d", params.Kind, params.Size, params.Replicas, piece), func(t *testing.T) {
				ts := newTestSet(t, params)
				ts.fillShape(shapes(params.Size, testing.Short())["empty-member"], 5)
				logicals := make([][]byte, params.Size)
				for r := range logicals {
					logicals[r] = logicalBytes(t, ts.dirs[r])
				}
				ms := ts.listAll()
				ts.mustEncodeAs(ms)
				checkEncoded(t, ts, ms, logicals)
			})
		}
	}
}
