package prefix

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/files"
)

// TestRoundTrip flushes a tree, checks the prefix copy and the entries,
// fetches it back and checks the result is the same tree, byte for byte and
// attribute for attribute.
func TestRoundTrip(t *testing.T) {
	for _, crc := range []bool{true, false} {
		t.Run(map[bool]string{true: "crc", false: "nocrc"}[crc], func(t *testing.T) {
			cache, prefix, back := fastDir(t), fastDir(t), fastDir(t)
			src := filepath.Join(cache, "ckpt.10")
			buildTree(t, src, false)
			want := treeOf(t, src)
			lg, _ := newTestLogger(t, false)
			o := Options{Streams: 3, CRC: crc, Logger: lg}

			entries, err := dirFlush(context.Background(), src, filepath.Join(prefix, "ckpt.10"), 2, listed(t, src), o)
			must(t, err)

			// The prefix holds the same bytes, symlinks and file modes.
			// Directories keep owner rwx there; their exact modes are in
			// the entries.
			got := treeOf(t, filepath.Join(prefix, "ckpt.10"))
			for p, w := range want {
				g, ok := got[p]
				if !ok {
					t.Errorf("prefix lacks %s", p)
					continue
				}
				if w.Type == files.Dir {
					w.Mode |= 0o700
				}
				if g != w {
					t.Errorf("prefix %s = %+v, want %+v", p, g, w)
				}
			}
			if len(got) != len(want) {
				t.Errorf("prefix has %d paths, source %d", len(got), len(want))
			}
			if l := leftovers(t, prefix); len(l) > 0 {
				t.Errorf("temporary files left: %v", l)
			}

			// Entries: one per path, sorted, with the source's attributes
			// and, with CRC on, an independently computed CRC32C.
			if len(entries) != len(want) {
				t.Fatalf("%d entries for %d paths", len(entries), len(want))
			}
			if !sort.SliceIsSorted(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path }) {
				t.Error("entries not sorted by path")
			}
			for _, e := range entries {
				w := want[e.Path]
				if e.Type != w.Type || e.Size != w.Size || e.Mode != w.Mode || e.MtimeNs != w.Mtime ||
					e.Target != w.Target || e.Node != 2 {
					t.Errorf("entry %+v does not match source %+v", e, w)
				}
				if e.Type == files.Regular && crc {
					if c := crcFile(t, filepath.Join(src, e.Path)); !e.HasCRC || e.CRC32C != c {
						t.Errorf("%s: CRC32C %08x (has %v), independent crc32 says %08x", e.Path, e.CRC32C, e.HasCRC, c)
					}
				}
				if e.HasCRC != (crc && e.Type == files.Regular) {
					t.Errorf("%s: HasCRC = %v with CRC %v", e.Path, e.HasCRC, crc)
				}
			}

			// Fetch back, from the entries as the manifest would store them.
			must(t, dirFetch(context.Background(), filepath.Join(prefix, "ckpt.10"), filepath.Join(back, "ckpt.10"), entries, o))
			if got := treeOf(t, filepath.Join(back, "ckpt.10")); !reflect.DeepEqual(got, want) {
				for p := range want {
					if got[p] != want[p] {
						t.Errorf("fetched %s = %+v, want %+v", p, got[p], want[p])
					}
				}
				for p := range got {
					if _, ok := want[p]; !ok {
						t.Errorf("fetched extra %s", p)
					}
				}
			}
		})
	}
}

// TestFlushToDisk flushes from tmpfs to a disk directory (where fsync,
// sync_file_range and fadvise do real work) and fetches back.
func TestFlushToDisk(t *testing.T) {
	cache, disk, back := fastDir(t), t.TempDir(), fastDir(t)
	src := filepath.Join(cache, "ckpt.1")
	buildTree(t, src, testing.Short())
	entries, err := dirFlush(context.Background(), src, filepath.Join(disk, "ckpt.1"), 0, listed(t, src), Options{CRC: true})
	must(t, err)
	must(t, dirFetch(context.Background(), filepath.Join(disk, "ckpt.1"), filepath.Join(back, "ckpt.1"), entries, Options{CRC: true}))
	if got, want := treeOf(t, filepath.Join(back, "ckpt.1")), treeOf(t, src); !reflect.DeepEqual(got, want) {
		t.Errorf("tree changed on the way through disk")
	}
}

// TestSparse flushes and fetches a 5 GiB file with three written blocks.
// Holes are skipped on both sides: it is quick, the copies stay sparse, and
// the CRC (computed for the holes arithmetically) matches plain crc32 over
// all 5 GiB.
func TestSparse(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 5 GiB of zeros for the independent CRC")
	}
	cache, prefix, back := fastDir(t), fastDir(t), fastDir(t)
	src := filepath.Join(cache, "ckpt.5", "sparse.bin")
	must(t, os.MkdirAll(filepath.Dir(src), 0o755))
	f, err := os.Create(src)
	must(t, err)
	const size = 5 << 30
	marks := map[int64]string{0: "head", 3<<30 + 12345: "middle", size - 5: "tail!"}
	for off, s := range marks {
		_, err := f.WriteAt([]byte(s), off)
		must(t, err)
	}
	must(t, f.Close())

	start := time.Now()
	entries, err := dirFlush(context.Background(), filepath.Dir(src), filepath.Join(prefix, "ckpt.5"), 0, listed(t, filepath.Dir(src)), Options{CRC: true})
	must(t, err)
	flushTook := time.Since(start)
	start = time.Now()
	must(t, dirFetch(context.Background(), filepath.Join(prefix, "ckpt.5"), filepath.Join(back, "ckpt.5"), entries, Options{CRC: true}))
	t.Logf("5 GiB sparse file: flush %v, fetch %v", flushTook, time.Since(start))

	if want := crcFile(t, src); entries[0].CRC32C != want {
		t.Errorf("CRC32C %08x, independent crc32 says %08x", entries[0].CRC32C, want)
	}
	for _, p := range []string{filepath.Join(prefix, "ckpt.5", "sparse.bin"), filepath.Join(back, "ckpt.5", "sparse.bin")} {
		var st syscall.Stat_t
		must(t, syscall.Stat(p, &st))
		if st.Size != size {
			t.Errorf("%s: size %d", p, st.Size)
		}
		if st.Blocks*512 > 1<<20 {
			t.Errorf("%s: %d bytes allocated, holes were written", p, st.Blocks*512)
		}
		g, err := os.Open(p)
		must(t, err)
		for off, s := range marks {
			b := make([]byte, len(s))
			_, err := g.ReadAt(b, off)
			must(t, err)
			if string(b) != s {
				t.Errorf("%s at %d: %q, want %q", p, off, b, s)
			}
		}
		b := make([]byte, 4096)
		_, err = g.ReadAt(b, 1<<30)
		must(t, err)
		for _, c := range b {
			if c != 0 {
				t.Fatalf("%s: hole at 1 GiB holds non-zero bytes", p)
			}
		}
		g.Close()
	}
}

// TestProgress checks Progress is called without overlap, monotonically,
// and ends at the total.
func TestProgress(t *testing.T) {
	cache, prefix := fastDir(t), fastDir(t)
	src := filepath.Join(cache, "ckpt.2")
	for i := range 20 {
		writeFile(t, filepath.Join(src, "f", string(rune('a'+i))), 300<<10, uint64(i))
	}
	var (
		mu       sync.Mutex
		inCall   bool
		calls    int
		last     int64 = -1
		lastTot  int64
		problems []string
	)
	o := Options{Streams: 4, CRC: true, Progress: func(done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if inCall {
			problems = append(problems, "overlapping calls")
		}
		inCall = true
		if done < last {
			problems = append(problems, "went backwards")
		}
		last, lastTot = done, total
		calls++
		inCall = false
	}}
	_, err := dirFlush(context.Background(), src, filepath.Join(prefix, "ckpt.2"), 0, listed(t, src), o)
	must(t, err)
	if len(problems) > 0 {
		t.Error(problems)
	}
	if calls == 0 || last != 20*300<<10 || lastTot != last {
		t.Errorf("last progress %d/%d after %d calls, want %d/%d", last, lastTot, calls, 20*300<<10, 20*300<<10)
	}
}

// TestFlushSecondNodeSharesDirs: two nodes flush disjoint files into one
// dataset directory with shared subdirectories.
func TestFlushSecondNodeSharesDirs(t *testing.T) {
	prefix := fastDir(t)
	dst := filepath.Join(prefix, "ckpt.3")
	var all []Entry
	for node := range 2 {
		src := filepath.Join(fastDir(t), "ckpt.3")
		writeFile(t, filepath.Join(src, "shared/rank_"+string(rune('0'+node))), 1000, uint64(node))
		es, err := dirFlush(context.Background(), src, dst, node, listed(t, src), Options{CRC: true})
		must(t, err)
		all = append(all, es...)
	}
	for node := range 2 {
		if _, err := os.Stat(filepath.Join(dst, "shared/rank_"+string(rune('0'+node)))); err != nil {
			t.Error(err)
		}
	}
	sortEntries(all)
	must(t, checkEntries(all)) // "shared" twice is fine: it is a directory
}

// TestFlushRetryAfterCrash: a crashed flush left a temporary file with
// garbage under the name the retry uses; the retry overwrites it and
// leaves nothing behind.
func TestFlushRetryAfterCrash(t *testing.T) {
	cache, prefix := fastDir(t), fastDir(t)
	src := filepath.Join(cache, "ckpt.4")
	writeFile(t, filepath.Join(src, "a.bin"), 5000, 1)
	dst := filepath.Join(prefix, "ckpt.4")
	must(t, os.MkdirAll(dst, 0o755))
	writeFile(t, filepath.Join(dst, tmpName("a.bin", 0)), 9999, 2)
	_, err := dirFlush(context.Background(), src, dst, 0, listed(t, src), Options{CRC: true})
	must(t, err)
	if l := leftovers(t, prefix); len(l) > 0 {
		t.Errorf("leftovers: %v", l)
	}
	if sha256File(t, filepath.Join(dst, "a.bin")) != sha256File(t, filepath.Join(src, "a.bin")) {
		t.Error("content differs")
	}
}

func TestTmpNameLong(t *testing.T) {
	long := strings.Repeat("x", 250)
	a, b := tmpName(long, 3), tmpName(long[:249]+"y", 3)
	if len(a) > 255 || a == b || strings.Contains(a, "/") || !strings.HasPrefix(a, tmpInfix) {
		t.Errorf("tmpName of long names: %q, %q", a, b)
	}
	if got := tmpName("rank_0", 12); got != ".rank_0.scrfs-tmp.12" {
		t.Errorf("tmpName = %q", got)
	}
}
