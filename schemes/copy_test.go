package schemes

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/redfile"
)

// TestReadCopy: every regular file of every member reads back byte for
// byte from each partner holding a copy of it; a byte flipped in a copy
// is reported corrupt, never returned.
func TestReadCopy(t *testing.T) {
	p := Params{Kind: Partner, Size: 4, Replicas: 2, PieceSize: 16 << 10}
	ts := newTestSet(t, p)
	for r, d := range ts.dirs {
		fill(t, d, uint64(r+1), spec{files: 4, maxSize: 70 << 10, extras: true})
	}
	ts.mustEncode()
	buf := make([]byte, 5000) // not a multiple of the block size
	for src := range p.Size {
		list, err := redfile.MemberFiles(ts.dirs[src], ts.set.Nodes[src])
		if err != nil {
			t.Fatal(err)
		}
		for _, holder := range p.recorders(src) {
			for _, f := range list {
				if f.Type != files.Regular {
					continue
				}
				var got bytes.Buffer
				meta, err := redfile.ReadCopy(ts.dirs[holder], ts.set.Nodes[holder], src, f.Path, &got, buf)
				if err != nil {
					t.Fatalf("copy of %d's %s on %d: %v", src, f.Path, holder, err)
				}
				want, err := os.ReadFile(filepath.Join(ts.dirs[src], f.Path))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), want) || meta.Size != int64(len(want)) {
					t.Fatalf("copy of %d's %s on %d: %d bytes differ from the %d written", src, f.Path, holder, got.Len(), len(want))
				}
			}
		}
	}
	if _, err := redfile.ReadCopy(ts.dirs[2], ts.set.Nodes[2], 3, "rank_1.part00.bin", &bytes.Buffer{}, buf); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("copy of a member rank 2 does not record: %v", err)
	}

	// Flip one byte inside rank 1's copy of rank 0's files.
	seg := readSegment(t, ts.redPath(1), 0)
	if len(seg) == 0 {
		t.Fatal("empty copy segment")
	}
	f, err := os.OpenFile(ts.redPath(1), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var one [1]byte
	at := int64(redfile.PreambleSize) + int64(len(seg))/2
	if _, err := f.ReadAt(one[:], at); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0xff
	if _, err := f.WriteAt(one[:], at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	list, _ := redfile.MemberFiles(ts.dirs[0], ts.set.Nodes[0])
	corrupt := 0
	for _, fm := range list {
		if fm.Type == files.Regular {
			if _, err := redfile.ReadCopy(ts.dirs[1], ts.set.Nodes[1], 0, fm.Path, &bytes.Buffer{}, buf); errors.Is(err, ErrCorrupt) {
				corrupt++
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	if corrupt == 0 {
		t.Fatal("a flipped byte in a copy went unnoticed")
	}
}
