package schemes

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
)

// sampleFile writes a small valid RS redundancy file and returns its bytes.
func sampleFile(t testing.TB) []byte {
	t.Helper()
	dir := t.TempDir()
	p := Params{Kind: RS, Size: 3, Parity: 1}
	m := Member{Rank: 1, Set: SetInfo{Group: 0, Groups: 1, Nodes: []int{4, 5, 6}}, Dataset: "d", Dir: dir}
	path := redPath(p, m)
	w, err := createRedFile(path, 5, MinPieceSize, []Segment{{Rank: 1, Index: 0, Length: 100}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.write(0, bytes.Repeat([]byte{7}, 100)); err != nil {
		t.Fatal(err)
	}
	list := []files.Meta{
		{Path: "a", Type: files.Dir, Mode: 0o755},
		{Path: "a/f", Type: files.Regular, Size: 150, Mode: 0o600, HasCRC: true, CRC32C: 1},
		{Path: "l", Type: files.Symlink, Target: "a/f"},
		{Path: "h", Type: files.HardLink, Target: "a/f", Size: 150},
	}
	members := []MemberMeta{{Rank: 1, Logical: 150, Files: list}, {Rank: 0}}
	if err := w.finish(newHeader(p, m, 100, members)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFormatRoundTrip(t *testing.T) {
	b := sampleFile(t)
	l, err := readLayout(bytes.NewReader(b), int64(len(b)), "sample")
	if err != nil {
		t.Fatal(err)
	}
	if l.hdr.Chunk != 100 || len(l.hdr.Members[0].Files) != 4 || len(l.crcs) != 2 || l.pre.dataLen != 100 {
		t.Fatalf("decoded %+v, %d crcs", l.hdr, len(l.crcs))
	}
	if string(b[:8]) != fileMagic || string(b[len(b)-8:]) != endMagic {
		t.Fatal("magics not where the format says")
	}
	// Every single-byte change anywhere outside the data is caught by
	// readLayout (the data by the block CRCs, checked on read).
	for i := range b {
		if i >= preambleSize && i < preambleSize+100 {
			continue
		}
		c := bytes.Clone(b)
		c[i] ^= 1
		if _, err := readLayout(bytes.NewReader(c), int64(len(c)), "x"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
	for n := 0; n < len(b); n += 7 {
		if _, err := readLayout(bytes.NewReader(b[:n]), int64(n), "x"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
}

func FuzzReadHeader(f *testing.F) {
	b := sampleFile(f)
	f.Add(b)
	f.Add(b[:preambleSize])
	f.Add([]byte(fileMagic))
	c := bytes.Clone(b)
	c[12] = 0xff // header length
	f.Add(c)
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := readLayout(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not wrapping ErrCorrupt: %v", err)
			}
			return
		}
		// Anything accepted must be self-consistent.
		if err := l.hdr.validate(); err != nil {
			t.Fatalf("accepted an invalid header: %v", err)
		}
		if int64(len(l.crcs)) != l.hdr.blockCount() || l.hdr.dataLen() != int64(l.pre.dataLen) {
			t.Fatal("accepted inconsistent lengths")
		}
	})
}

func FuzzTrailer(f *testing.F) {
	f.Add(encodeTrailer([]uint32{1, 2, 3}), int64(3))
	f.Add(encodeTrailer(nil), int64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, int64(1<<30))
	f.Fuzz(func(t *testing.T, data []byte, want int64) {
		crcs, err := decodeTrailer(data, want)
		if err != nil {
			return
		}
		if int64(len(crcs)) != want || !bytes.Equal(encodeTrailer(crcs), data) {
			t.Fatalf("accepted a trailer that does not round-trip")
		}
	})
}

// FuzzPeerMessages feeds the decoders of what peers send: hellos, member
// records and abort messages.
func FuzzPeerMessages(f *testing.F) {
	h, _ := json.Marshal(hello{Op: "rebuild", Kind: "rs", Size: 3, Metas: []MemberMeta{{Rank: 1, Logical: 3, Files: []files.Meta{{Path: "f", Type: files.Regular, Size: 3}}}}})
	f.Add(h)
	m, _ := json.Marshal(MemberMeta{Rank: 2, Files: []files.Meta{{Path: "d", Type: files.Dir}, {Path: "d/s", Type: files.Symlink, Target: "/x"}}})
	f.Add(m)
	f.Add(encodeAbort(1, ErrCorrupt)[frameLen:])
	f.Fuzz(func(t *testing.T, data []byte) {
		var hl hello
		if json.Unmarshal(data, &hl) == nil {
			own := hello{Op: "rebuild", Kind: "rs", Size: 3}
			_ = own.check(&hl, 1)
			for i := range hl.Metas {
				_ = checkMeta(&hl.Metas[i], hl.Metas[i].Rank)
			}
		}
		var mm MemberMeta
		if json.Unmarshal(data, &mm) == nil {
			if checkMeta(&mm, mm.Rank) == nil {
				for _, fm := range mm.Files {
					if files.CheckPath(fm.Path) != nil {
						t.Fatalf("accepted path %q", fm.Path)
					}
				}
			}
		}
		if err := decodeAbort(data); !errors.Is(err, ErrAborted) {
			t.Fatalf("abort decoded to %v", err)
		}
	})
}

func TestRemoveOldKeepsOthers(t *testing.T) {
	dir := t.TempDir()
	meta := filepath.Join(dir, layout.MetaDir)
	os.MkdirAll(meta, 0o700)
	for _, n := range []string{"5.xor.grp_1_of_1.mem_1_of_4.redset", "5.rs.grp_1_of_1.mem_1_of_4.redset.tmp", "6.xor.grp_1_of_1.mem_2_of_4.redset", "5.notes", "keep.me"} {
		os.WriteFile(filepath.Join(meta, n), nil, 0o600)
	}
	if err := removeOld(dir, 5, "5.partner.grp_1_of_1.mem_1_of_4.redset"); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(meta)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	want := []string{"5.notes", "6.xor.grp_1_of_1.mem_2_of_4.redset", "keep.me"}
	if len(left) != len(want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	for i := range want {
		if left[i] != want[i] {
			t.Fatalf("left %v, want %v", left, want)
		}
	}
}
