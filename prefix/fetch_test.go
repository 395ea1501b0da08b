package prefix

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/files"
)

// flushed returns a prefix dataset directory holding a flushed tree, and
// its entries.
func flushed(t *testing.T) (string, []Entry) {
	t.Helper()
	cache, prefix := fastDir(t), fastDir(t)
	src := filepath.Join(cache, "ckpt.7")
	buildTree(t, src, true)
	dst := filepath.Join(prefix, "ckpt.7")
	es, err := dirFlush(context.Background(), src, dst, 0, listed(t, src), Options{CRC: true, Streams: 2})
	must(t, err)
	return dst, es
}

// wantCorrupt asserts err is a *CorruptError about path whose reason
// contains reason.
func wantCorrupt(t *testing.T, err error, path, reason string) {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *CorruptError", err)
	}
	if ce.Path != path || !strings.Contains(ce.Reason, reason) {
		t.Errorf("CorruptError{%q, %q}, want path %q and a reason with %q", ce.Path, ce.Reason, path, reason)
	}
	if !strings.HasPrefix(err.Error(), "fetch ckpt.7: corrupt "+path) {
		t.Errorf("error text %q", err)
	}
}

func TestFetchCorruptByte(t *testing.T) {
	src, es := flushed(t)
	victim := filepath.Join(src, "big.bin")
	f, err := os.OpenFile(victim, os.O_RDWR, 0)
	must(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, 2<<20+5)
	must(t, err)
	b[0] ^= 0x10
	_, err = f.WriteAt(b, 2<<20+5)
	must(t, err)
	must(t, f.Close())

	err = dirFetch(context.Background(), src, filepath.Join(fastDir(t), "ckpt.7"), es, Options{CRC: true})
	wantCorrupt(t, err, victim, "crc32c")

	// Without CRC the flipped byte goes unnoticed: sizes are all Fetch
	// can check then.
	must(t, dirFetch(context.Background(), src, filepath.Join(fastDir(t), "ckpt.7"), es, Options{}))
}

func TestFetchTruncated(t *testing.T) {
	src, es := flushed(t)
	victim := filepath.Join(src, "rank_0.bin")
	must(t, os.Truncate(victim, 1000))
	err := dirFetch(context.Background(), src, filepath.Join(fastDir(t), "ckpt.7"), es, Options{CRC: true})
	wantCorrupt(t, err, victim, "size 1000, manifest says 1048576")
}

// TestFetchShrinksWhileReading covers a source that ends early after its
// size was checked (a truncation racing the read).
func TestFetchShrinksWhileReading(t *testing.T) {
	dir := fastDir(t)
	p := filepath.Join(dir, "f")
	writeFile(t, p, 1000, 1)
	in, err := os.Open(p)
	must(t, err)
	defer in.Close()
	out, err := os.Create(filepath.Join(dir, "g"))
	must(t, err)
	defer out.Close()
	c := &copier{ctx: context.Background(), fetch: true, o: Options{CRC: true}.normalized(), prog: startProgress(nil, 0)}
	tk := &fileTask{src: p, name: "g", size: 5000, in: in, out: out, inFd: int(in.Fd()), outFd: int(out.Fd())}
	_, err = c.copyRange(tk, 0, 5000, make([]byte, 4096))
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "truncated: ends at byte 1000") {
		t.Errorf("got %v", err)
	}
}

func TestFetchMissing(t *testing.T) {
	for _, name := range []string{"sub/deeper/x.dat", "link_rel", "empty.bin"} {
		t.Run(name, func(t *testing.T) {
			src, es := flushed(t)
			victim := filepath.Join(src, name)
			must(t, os.Remove(victim))
			err := dirFetch(context.Background(), src, filepath.Join(fastDir(t), "ckpt.7"), es, Options{CRC: true})
			wantCorrupt(t, err, victim, "missing")
		})
	}
}

func TestFetchWrongType(t *testing.T) {
	src, es := flushed(t)
	victim := filepath.Join(src, "rank_1.bin")
	must(t, os.Remove(victim))
	must(t, os.Symlink("/etc/passwd", victim))
	err := dirFetch(context.Background(), src, filepath.Join(fastDir(t), "ckpt.7"), es, Options{CRC: true})
	wantCorrupt(t, err, victim, "symbolic link")

	src, es = flushed(t)
	victim = filepath.Join(src, "link_rel")
	must(t, os.Remove(victim))
	must(t, os.Symlink("elsewhere", victim))
	err = dirFetch(context.Background(), src, filepath.Join(fastDir(t), "ckpt.7"), es, Options{CRC: true})
	wantCorrupt(t, err, victim, `points to "elsewhere"`)
}

// TestFetchRefusesEscapes: entries from a hostile or corrupt manifest must
// not make Fetch write outside its destination.
func TestFetchRefusesEscapes(t *testing.T) {
	src, _ := flushed(t)
	outside := fastDir(t)
	dst := filepath.Join(fastDir(t), "ckpt.7")
	cases := map[string][]Entry{
		"dotdot":         {{Meta: files.Meta{Path: "../x", Type: files.Regular}}},
		"absolute":       {{Meta: files.Meta{Path: "/tmp/x", Type: files.Regular}}},
		"below symlink":  {{Meta: files.Meta{Path: "l", Type: files.Symlink, Target: outside}}, {Meta: files.Meta{Path: "l/x", Type: files.Regular}}},
		"below file":     {{Meta: files.Meta{Path: "f", Type: files.Regular}}, {Meta: files.Meta{Path: "f/x", Type: files.Regular}}},
		"twice":          {{Meta: files.Meta{Path: "f", Type: files.Regular}}, {Meta: files.Meta{Path: "f", Type: files.Regular}, Node: 1}},
		"unclean":        {{Meta: files.Meta{Path: "a//b", Type: files.Regular}}},
		"meta dir":       {{Meta: files.Meta{Path: ".scrfs/x", Type: files.Regular}}},
		"negative size":  {{Meta: files.Meta{Path: "f", Type: files.Regular, Size: -1}}},
		"unknown type":   {{Meta: files.Meta{Path: "f", Type: 9}}},
		"mode bits":      {{Meta: files.Meta{Path: "f", Type: files.Regular, Mode: 0o170000}}},
		"empty target":   {{Meta: files.Meta{Path: "l", Type: files.Symlink}}},
		"dir with crc":   {{Meta: files.Meta{Path: "d", Type: files.Dir, HasCRC: true}}},
		"file w/ target": {{Meta: files.Meta{Path: "f", Type: files.Regular, Target: "x"}}},
	}
	for name, es := range cases {
		t.Run(name, func(t *testing.T) {
			err := dirFetch(context.Background(), src, dst, es, Options{})
			if !errors.Is(err, ErrBadEntry) {
				t.Errorf("got %v, want ErrBadEntry", err)
			}
			if _, err := os.Stat(dst); err == nil {
				t.Error("Fetch created its destination before validating")
			}
		})
	}
	if f := regularFiles(t, outside); len(f) > 0 {
		t.Errorf("written outside: %v", f)
	}
}
