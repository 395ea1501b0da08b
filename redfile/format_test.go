package redfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/layout"
)

// sampleHeader is the header of rank 1 of an RS set of 3 (k = 1) that
// protects rank 0, with a 100-byte chunk.
func sampleHeader() *Header {
	list := []files.Meta{
		{Path: "a", Type: files.Dir, Mode: 0o755},
		{Path: "a/f", Type: files.Regular, Size: 150, Mode: 0o600, HasCRC: true, CRC32C: 1},
		{Path: "l", Type: files.Symlink, Target: "a/f"},
		{Path: "h", Type: files.HardLink, Target: "a/f", Size: 150},
	}
	return &Header{Version: Version, Scheme: layout.KindRS, Size: 3, Parity: 1, Groups: 1, Nodes: []int{4, 5, 6},
		Rank: 1, Dataset: "d", Chunk: 100,
		Members: []MemberMeta{{Rank: 1, Logical: 150, Files: list}, {Rank: 0}}}
}

// sampleFile writes a small valid RS redundancy file into dir and returns
// its path and bytes.
func sampleFile(t testing.TB, dir string) (string, []byte) {
	t.Helper()
	path := filepath.Join(dir, layout.MetaDir, layout.RedundancyFileName(5, layout.KindRS, 0, 1, 1, 3))
	w, err := Create(path, 5, MinBlockSize, []Segment{{Rank: 1, Index: 0, Length: 100}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(0, bytes.Repeat([]byte{7}, 100)); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(sampleHeader()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

func TestFormatRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path, b := sampleFile(t, dir)
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
		if i >= PreambleSize && i < PreambleSize+100 {
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

	// Read back through Open, Find and MemberFiles; a flipped data byte
	// is caught by the block it lies in.
	if found, err := Find(dir, 5); err != nil || found != path {
		t.Fatalf("Find: %q, %v", found, err)
	}
	if _, err := Find(dir, 6); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Find of another node: %v", err)
	}
	if list, err := MemberFiles(dir, 5); err != nil || len(list) != 4 {
		t.Fatalf("MemberFiles: %v, %v", list, err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 30)
	if err := f.Reader().ReadAt(0, 50, got); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{7}, 30)) {
		t.Fatalf("ReadAt: %v", err)
	}
	if err := f.VerifyAll(nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	flipped := bytes.Clone(b)
	flipped[PreambleSize+70] ^= 1
	if err := os.WriteFile(path, flipped, 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Reader().ReadAt(0, 0, got); err != nil {
		t.Errorf("block 0 is intact: %v", err)
	}
	if err := f.Reader().ReadAt(0, 64, got[:1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("block 1: %v, want ErrCorrupt", err)
	}
	if err := f.VerifyAll(nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("VerifyAll: %v, want ErrCorrupt", err)
	}
}

func FuzzReadHeader(f *testing.F) {
	_, b := sampleFile(f, f.TempDir())
	f.Add(b)
	f.Add(b[:PreambleSize])
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
	if want := []string{"5.notes", "6.xor.grp_1_of_1.mem_2_of_4.redset", "keep.me"}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}

// TestSpareLosesItsMagic: a spare that was a good redundancy file does not
// pass for one while it is being overwritten, and a spare that is gone only
// costs the reuse.
func TestSpareLosesItsMagic(t *testing.T) {
	old, _ := sampleFile(t, t.TempDir())
	tmp := filepath.Join(filepath.Dir(old), "new.redset.tmp")
	f, err := openTmp(tmp, func() string { return old })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, PreambleSize)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := decodePreamble(head); err == nil {
		t.Fatal("a reused spare still carries a valid preamble before finish")
	}

	g, err := openTmp(tmp+"2", func() string { return old + ".gone" })
	if err != nil {
		t.Fatalf("a spare that is gone failed the open instead of being skipped: %v", err)
	}
	g.Close()
}

func TestBlockCRCs(t *testing.T) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b := blockCRCs{bs: 64}
	for off := 0; off < len(data); {
		n := min(len(data)-off, 1+off%97)
		b.write(data[off : off+n])
		off += n
	}
	got := b.finish()
	if len(got) != (len(data)+63)/64 {
		t.Fatalf("%d blocks", len(got))
	}
	for i, c := range got {
		end := min(len(data), (i+1)*64)
		if c != crc32c.Checksum(data[i*64:end]) {
			t.Fatalf("block %d differs", i)
		}
	}
}

func TestSchemeRules(t *testing.T) {
	for _, s := range []Scheme{
		{Kind: "single", Size: 1}, {Kind: "partner", Size: 2, Replicas: 1}, {Kind: "XOR", Size: 2},
		{Kind: "rs", Size: 200, Parity: 56},
	} {
		if err := s.Check(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	for _, s := range []Scheme{
		{Kind: "single"}, {Kind: "partner", Size: 3, Replicas: 3}, {Kind: "xor", Size: 1},
		{Kind: "rs", Size: 4, Parity: 4}, {Kind: "rs", Size: 200, Parity: 57}, {Kind: "raid6", Size: 4},
	} {
		if err := s.Check(); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	rs := Scheme{Kind: "rs", Size: 5, Parity: 2}
	if got := rs.Recorded(0); !slices.Equal(got, []int{4, 3}) {
		t.Errorf("rs rank 0 records %v, want [4 3]", got)
	}
	if got := rs.Recorders(4); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("rs rank 4 is recorded by %v, want [0 1]", got)
	}
	if got := (Scheme{Kind: "single", Size: 3}).Recorded(1); got != nil {
		t.Errorf("single records %v", got)
	}
}
