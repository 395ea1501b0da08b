package schemes

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/testutil"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/redfile"
)

// testTimeout bounds every in-process operation so a deadlock fails the
// test instead of hanging it.
const testTimeout = 60 * time.Second

// tempBase returns a fresh directory, on tmpfs when available: the cache
// lives in /dev/shm in production, and fsync there costs nothing.
func tempBase(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "scrfs-schemes-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// testSet is p members' dataset directories plus the set description.
type testSet struct {
	t    testing.TB
	p    Params
	dirs []string
	set  SetInfo
	name string
	bufs []*Buffers // per member, as each daemon keeps one; nil = none
}

func newTestSet(t testing.TB, p Params) *testSet {
	t.Helper()
	base := tempBase(t)
	ts := &testSet{t: t, p: p, name: "ckpt.7", set: SetInfo{Group: 1, Groups: 3}}
	for r := 0; r < p.Size; r++ {
		d := filepath.Join(base, fmt.Sprintf("node%d", r), ts.name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		ts.dirs = append(ts.dirs, d)
		// Node indices differ from ranks so a mix-up shows in file names.
		ts.set.Nodes = append(ts.set.Nodes, 20+3*r)
	}
	return ts
}

func (ts *testSet) member(r int) Member {
	return Member{Rank: r, Set: ts.set, Dataset: ts.name, Dir: ts.dirs[r]}
}

// listAll returns every member with its files listed now, as completion
// lists them for an encode. Encodes of the same lists write the same
// files, byte for byte; lists taken anew may differ in access times.
func (ts *testSet) listAll() []Member {
	ts.t.Helper()
	ms := make([]Member, ts.p.Size)
	for r := range ms {
		ms[r] = ts.member(r)
		var err error
		if ms[r].Files, err = files.Scan(ms[r].Dir); err != nil {
			ts.t.Fatal(err)
		}
	}
	return ms
}

// runAll runs fn for every member concurrently over a fresh memNet; a
// member's links close when its call returns, as a real transport's would.
func runAll(t testing.TB, size int, fn func(ctx context.Context, r int, links Links) (*Result, error)) ([]*Result, []error) {
	t.Helper()
	return runAllOn(t, newMemNet(), size, fn)
}

// runAllOn is runAll over net.
func runAllOn(t testing.TB, net *memNet, size int, fn func(ctx context.Context, r int, links Links) (*Result, error)) ([]*Result, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res := make([]*Result, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := 0; r < size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer net.closeRank(r)
			res[r], errs[r] = fn(ctx, r, net.links(r))
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("operation did not finish within %v (deadlock?)", testTimeout)
	}
	return res, errs
}

// memberOpts returns opts plus member r's buffer pool, if any.
func (ts *testSet) memberOpts(r int, opts []Option) []Option {
	if ts.bufs != nil {
		return append([]Option{WithBuffers(ts.bufs[r])}, opts...)
	}
	return opts
}

func (ts *testSet) encode(opts ...Option) ([]*Result, []error) {
	return ts.encodeAs(ts.listAll(), opts...)
}

// encodeAs encodes the members ms, lists given.
func (ts *testSet) encodeAs(ms []Member, opts ...Option) ([]*Result, []error) {
	return runAll(ts.t, ts.p.Size, func(ctx context.Context, r int, links Links) (*Result, error) {
		return Encode(ctx, ts.p, ms[r], links, ts.memberOpts(r, opts)...)
	})
}

func (ts *testSet) rebuild(lost []int, opts ...Option) ([]*Result, []error) {
	return runAll(ts.t, ts.p.Size, func(ctx context.Context, r int, links Links) (*Result, error) {
		return Rebuild(ctx, ts.p, ts.member(r), lost, links, ts.memberOpts(r, opts)...)
	})
}

func (ts *testSet) mustEncode(opts ...Option) []*Result {
	ts.t.Helper()
	return ts.mustEncodeAs(ts.listAll(), opts...)
}

// mustEncodeAs is encodeAs that fails the test on any error.
func (ts *testSet) mustEncodeAs(ms []Member, opts ...Option) []*Result {
	ts.t.Helper()
	res, errs := ts.encodeAs(ms, opts...)
	for r, err := range errs {
		if err != nil {
			ts.t.Fatalf("encode rank %d: %v", r, err)
		}
	}
	return res
}

func (ts *testSet) redPath(r int) string { return redPath(ts.p, ts.member(r)) }

// spec shapes one member's generated dataset.
type spec struct {
	files   int   // regular files
	maxSize int64 // each file's size is in [0, maxSize]
	extras  bool  // add nested/empty dirs, a symlink, a hard link, a 0-byte file
}

// fill writes a pseudo-random dataset into dir (deterministic in seed).
func fill(t testing.TB, dir string, seed uint64, sp spec) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	subdirs := []string{".", "a", "a/b", "z"}
	for _, d := range subdirs[1:] {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	var first string
	for i := 0; i < sp.files; i++ {
		size := int64(0)
		if sp.maxSize > 0 {
			size = rng.Int64N(sp.maxSize + 1)
		}
		name := filepath.Join(subdirs[rng.IntN(len(subdirs))], fmt.Sprintf("rank_%d.part%02d.bin", seed%100, i))
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		p := filepath.Join(dir, name)
		must(os.WriteFile(p, b, 0o600|os.FileMode(rng.IntN(2))*0o040))
		if first == "" {
			first = name
		}
	}
	if sp.extras {
		must(os.MkdirAll(filepath.Join(dir, "empty", "deeper"), 0o750))
		must(os.WriteFile(filepath.Join(dir, "a", "zero.bin"), nil, 0o644))
		must(os.Symlink("a/zero.bin", filepath.Join(dir, "sym")))
		must(os.Symlink("/nonexistent/target", filepath.Join(dir, "z", "dangling")))
		if first != "" {
			must(os.Link(filepath.Join(dir, first), filepath.Join(dir, "z", "hardlink")))
		}
		must(os.Chmod(filepath.Join(dir, "a", "b"), 0o711))
	}
	// Distinct times per entry, applied deepest first so directory times
	// are not disturbed by later changes to their contents.
	var paths []string
	must(filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			paths = append(paths, p)
		}
		return err
	}))
	slices.Reverse(paths)
	for i, p := range paths {
		mt := time.Unix(1_600_000_000+int64(seed)*1000+int64(i), int64(rng.IntN(1e9)))
		at := mt.Add(time.Duration(rng.IntN(1e6)) * time.Second)
		fi, err := os.Lstat(p)
		must(err)
		if os.Geteuid() == 0 {
			must(os.Lchown(p, 1000+int(seed%7), 2000+int(seed%5)))
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			continue // os.Chtimes follows links; the snapshot ignores symlink times
		}
		must(os.Chtimes(p, at, mt))
	}
}

// entry is what a snapshot records of one dataset entry.
type entry struct {
	typ    os.FileMode
	mode   os.FileMode
	size   int64
	sum    [32]byte
	mtime  int64
	target string
	uid    uint32
	gid    uint32
	ino    uint64
}

// snapshot records every entry of dir (outside .scrfs) with its content
// hash and metadata; hard links show as equal inode groups.
func snapshot(t testing.TB, dir string) map[string]entry {
	t.Helper()
	out := make(map[string]entry)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == layout.MetaDir {
			return filepath.SkipDir
		}
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		e := entry{typ: fi.Mode().Type(), mode: fi.Mode().Perm(), uid: st.Uid, gid: st.Gid, ino: st.Ino}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.sum, e.size, e.mtime = sha256.Sum256(b), fi.Size(), st.Mtim.Nano()
		case fi.IsDir():
			e.mtime = st.Mtim.Nano()
		case fi.Mode()&os.ModeSymlink != 0:
			e.target, _ = os.Readlink(p)
			e.mode = 0
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compareSnapshots fails unless got equals want, up to inode numbers: two
// paths share an inode in got exactly when they do in want.
func compareSnapshots(t testing.TB, label string, want, got map[string]entry) {
	t.Helper()
	for p, w := range want {
		g, ok := got[p]
		if !ok {
			t.Errorf("%s: %s missing", label, p)
			continue
		}
		wi, gi := w.ino, g.ino
		w.ino, g.ino = 0, 0
		if w != g {
			t.Errorf("%s: %s differs:\n got %+v\nwant %+v", label, p, g, w)
		}
		for q, w2 := range want {
			if q != p && w2.typ.IsRegular() && w.typ.IsRegular() {
				if (w2.ino == wi) != (got[q].ino == gi) {
					t.Errorf("%s: hard-link grouping of %s and %s differs", label, p, q)
				}
			}
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: unexpected %s", label, p)
		}
	}
}

// readSegment returns the verified bytes of segment seg of a redundancy file.
func readSegment(t testing.TB, path string, seg int) []byte {
	t.Helper()
	rf, err := redfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	sg := rf.Header().Segments[seg]
	b := make([]byte, sg.Length)
	if err := rf.Reader().ReadAt(seg, 0, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// logicalBytes returns the concatenation of dir's regular files in files.Scan
// order, read independently of the package's logical file code.
func logicalBytes(t testing.TB, dir string) []byte {
	t.Helper()
	list, err := files.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, f := range list {
		if f.Type != files.Regular {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// TestMain fails the run if goroutines of this package outlive the tests:
// every sender, reader and worker of an operation must be gone when it
// returns.
func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/schemes.") }
