package fs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
)

// The tests in this file drive the node tree the way go-fuse would, without
// a kernel mount (as gocryptfs's newTestFS does): fs.NewNodeFS attaches the
// root, then the node methods are called directly. They need no /dev/fuse
// and run in milliseconds.

// nodeTest is an unmounted FS with its root attached to a go-fuse bridge.
type nodeTest struct {
	*testMount
	fsys *FS
	ctx  context.Context
}

func newNodeTest(t *testing.T, mc mountConfig) *nodeTest {
	t.Helper()
	tm, fsys := newTestFS(t, mc)
	gofs.NewNodeFS(fsys.root, fsys.NodeOptions())
	return &nodeTest{testMount: tm, fsys: fsys, ctx: context.Background()}
}

// mkdir makes directory name in parent (a namespace or dataset directory)
// and adds it to the tree, as go-fuse does with what a MKDIR returns.
func (nt *nodeTest) mkdir(t *testing.T, parent gofs.InodeEmbedder, name string) *gofs.Inode {
	t.Helper()
	var out fuse.EntryOut
	var ch *gofs.Inode
	var errno syscall.Errno
	switch p := parent.(type) {
	case *nsNode:
		ch, errno = p.Mkdir(nt.ctx, name, 0o755, &out)
	case *dsNode:
		ch, errno = p.Mkdir(nt.ctx, name, 0o755, &out)
	}
	if errno != 0 {
		t.Fatalf("mkdir %s: %v", name, errno)
	}
	parent.EmbeddedInode().AddChild(name, ch, true)
	return ch
}

// writeFile creates name in dataset directory dir, writes data and
// releases the handle, as open/write/close through the mount would.
func (nt *nodeTest) writeFile(t *testing.T, dir *dsNode, name string, data []byte) *dsNode {
	t.Helper()
	var out fuse.EntryOut
	ch, fh, _, errno := dir.Create(nt.ctx, name, syscall.O_WRONLY|syscall.O_TRUNC, 0o644, &out)
	if errno != 0 {
		t.Fatalf("create %s: %v", name, errno)
	}
	dir.AddChild(name, ch, true)
	h := fh.(*handle)
	if n, errno := h.Write(nt.ctx, data, 0); errno != 0 || int(n) != len(data) {
		t.Fatalf("write %s: %d, %v", name, n, errno)
	}
	if errno := h.Release(nt.ctx); errno != 0 {
		t.Fatalf("release %s: %v", name, errno)
	}
	return ch.Operations().(*dsNode)
}

// names lists a directory stream's names.
func names(t *testing.T, ds gofs.DirStream, errno syscall.Errno) []string {
	t.Helper()
	if errno != 0 {
		t.Fatalf("readdir: %v", errno)
	}
	defer ds.Close()
	var out []string
	for ds.HasNext() {
		e, errno := ds.Next()
		if errno != 0 {
			t.Fatalf("readdir: %v", errno)
		}
		out = append(out, e.Name)
	}
	slices.Sort(out)
	return out
}

func TestNodeCreateCountsFilesAndBytes(t *testing.T) {
	nt := newNodeTest(t, mountConfig{})
	ds := nt.mkdir(t, nt.fsys.root, "ckpt.1").Operations().(*dsNode)
	sub := nt.mkdir(t, ds, "sub").Operations().(*dsNode)
	nt.writeFile(t, ds, "a", []byte("hello"))
	nt.writeFile(t, sub, "b", bytes.Repeat([]byte("x"), 3000))
	info := nt.store.Get("ckpt.1").Info()
	if info.Files != 2 || info.Bytes != 3005 || info.Writers != 0 {
		t.Fatalf("dataset counts %d files, %d bytes, %d writers; want 2, 3005, 0", info.Files, info.Bytes, info.Writers)
	}
	got, err := os.ReadFile(filepath.Join(nt.store.CacheDir(), "ckpt.1", "sub", "b"))
	if err != nil || len(got) != 3000 {
		t.Fatalf("cache file: %d bytes, %v", len(got), err)
	}
}

// TestNodeMarkerCountsOnceClosed: a marker completes its dataset when its
// handle is released, not when it is created, and the dataset is read-only
// from then on.
func TestNodeMarkerCountsOnceClosed(t *testing.T) {
	nt := newNodeTest(t, mountConfig{rules: cache.Rules{Markers: []string{"COMPLETE"}}})
	ds := nt.mkdir(t, nt.fsys.root, "ckpt.2").Operations().(*dsNode)
	nt.writeFile(t, ds, "rank_0", []byte("data"))
	var out fuse.EntryOut
	ch, fh, _, errno := ds.Create(nt.ctx, "COMPLETE", syscall.O_WRONLY, 0o644, &out)
	if errno != 0 {
		t.Fatal(errno)
	}
	ds.AddChild("COMPLETE", ch, true)
	if st := nt.store.Get("ckpt.2").State(); st != cache.Writing {
		t.Fatalf("state %s while the marker is open", st)
	}
	fh.(*handle).Release(nt.ctx)
	nt.awaitComplete(t, "ckpt.2")
	if _, _, _, errno := ds.Create(nt.ctx, "late", syscall.O_WRONLY, 0o644, &out); errno != syscall.EROFS {
		t.Fatalf("create in a complete dataset: %v, want EROFS", errno)
	}
	if _, errno := ds.Mkdir(nt.ctx, "d", 0o755, &out); errno != syscall.EROFS {
		t.Fatalf("mkdir in a complete dataset: %v, want EROFS", errno)
	}
}

func TestNodeListingsHaveDotsAndHideMetaDir(t *testing.T) {
	nt := newNodeTest(t, mountConfig{match: `^runs/(?P<dataset>[^/]+)/`})
	runs := nt.mkdir(t, nt.fsys.root, "runs").Operations().(*nsNode)
	ds := nt.mkdir(t, runs, "ckpt.3").Operations().(*dsNode)
	sub := nt.mkdir(t, ds, "sub").Operations().(*dsNode)
	if err := os.Mkdir(filepath.Join(nt.store.CacheDir(), "ckpt.3", ".scrfs"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dir  gofs.NodeReaddirer
		want []string
	}{
		{"mount root", nt.fsys.root, []string{".", "..", "runs"}},
		{"namespace dir", runs, []string{".", "..", "ckpt.3"}},
		{"dataset root", ds, []string{".", "..", "sub"}},
		{"inside a dataset", sub, []string{".", ".."}},
	} {
		s, errno := c.dir.Readdir(nt.ctx)
		if got := names(t, s, errno); !slices.Equal(got, c.want) {
			t.Errorf("%s lists %q, want %q", c.name, got, c.want)
		}
	}
	// ".." of a dataset's root is the namespace directory, as stat shows it.
	s, _ := ds.Readdir(nt.ctx)
	defer s.Close()
	for s.HasNext() {
		if e, _ := s.Next(); e.Name == ".." && e.Ino != runs.StableAttr().Ino {
			t.Errorf(`".." of the dataset root has ino %d, want the namespace dir's %d`, e.Ino, runs.StableAttr().Ino)
		}
	}
}

// TestNodeLongPath: an entry whose path inside the dataset is far longer
// than PATH_MAX is created, written, read back, listed, statted and
// removed: every operation names it relative to a directory descriptor.
func TestNodeLongPath(t *testing.T) {
	nt := newNodeTest(t, mountConfig{})
	dir := nt.mkdir(t, nt.fsys.root, "deep").Operations().(*dsNode)
	component := strings.Repeat("d", 200)
	for range 30 { // 30 × 201 bytes: 6,030 bytes of path
		dir = nt.mkdir(t, dir, component).Operations().(*dsNode)
	}
	if rel, _ := dir.rel(); len(rel) <= 4096 {
		t.Fatalf("path of %d bytes is not beyond PATH_MAX", len(rel))
	}
	data := bytes.Repeat([]byte("long path "), 1000)
	f := nt.writeFile(t, dir, "file", data)

	fh, _, errno := f.Open(nt.ctx, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("open: %v", errno)
	}
	res, errno := fh.(*handle).Read(nt.ctx, make([]byte, 2*len(data)), 0)
	if errno != 0 {
		t.Fatalf("read: %v", errno)
	}
	got, _ := res.Bytes(make([]byte, 2*len(data)))
	fh.(*handle).Release(nt.ctx)
	if !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(data))
	}
	var attr fuse.AttrOut
	if errno := f.Getattr(nt.ctx, nil, &attr); errno != 0 || attr.Size != uint64(len(data)) {
		t.Fatalf("getattr: size %d, %v", attr.Size, errno)
	}
	var out fuse.EntryOut
	if ch, errno := dir.Lookup(nt.ctx, "file", &out); errno != 0 || ch.StableAttr().Ino != f.StableAttr().Ino {
		t.Fatalf("lookup: %v", errno)
	}
	s, errno := dir.Readdir(nt.ctx)
	if got := names(t, s, errno); !slices.Equal(got, []string{".", "..", "file"}) {
		t.Fatalf("readdir: %q", got)
	}
	if errno := dir.Unlink(nt.ctx, "file"); errno != 0 {
		t.Fatalf("unlink: %v", errno)
	}
	dir.RmChild("file")
	if _, errno := dir.Lookup(nt.ctx, "file", &out); errno != syscall.ENOENT {
		t.Fatalf("lookup after unlink: %v, want ENOENT", errno)
	}
	if info := nt.store.Get("deep").Info(); info.Files != 0 || info.Bytes != 0 {
		t.Fatalf("after unlink the dataset counts %d files, %d bytes", info.Files, info.Bytes)
	}
}

// TestNodeModeZeroKept: a mode of 0000 is stored and reported as such.
func TestNodeModeZeroKept(t *testing.T) {
	nt := newNodeTest(t, mountConfig{})
	ds := nt.mkdir(t, nt.fsys.root, "ckpt.4").Operations().(*dsNode)
	f := nt.writeFile(t, ds, "f", []byte("x"))
	in := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: 0}}
	var out fuse.AttrOut
	if errno := f.Setattr(nt.ctx, nil, &in, &out); errno != 0 {
		t.Fatalf("setattr: %v", errno)
	}
	if out.Mode&0o7777 != 0 {
		t.Fatalf("mode %o after chmod 0", out.Mode&0o7777)
	}
	st, err := os.Stat(filepath.Join(nt.store.CacheDir(), "ckpt.4", "f"))
	if err != nil || st.Mode().Perm() != 0 {
		t.Fatalf("cache file mode %v, %v", st.Mode(), err)
	}
}

// TestNodeSetattrRefusesSymlinkMode: a symlink's mode is never changed by
// following it to its target.
func TestNodeSetattrRefusesSymlinkMode(t *testing.T) {
	nt := newNodeTest(t, mountConfig{})
	ds := nt.mkdir(t, nt.fsys.root, "ckpt.5").Operations().(*dsNode)
	outside := filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, nil, 0o644)
	var out fuse.EntryOut
	ch, errno := ds.Symlink(nt.ctx, outside, "s", &out)
	if errno != 0 {
		t.Fatal(errno)
	}
	ds.AddChild("s", ch, true)
	in := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: 0o777}}
	var attr fuse.AttrOut
	if errno := ch.Operations().(*dsNode).Setattr(nt.ctx, nil, &in, &attr); errno != syscall.EOPNOTSUPP {
		t.Fatalf("chmod of a symlink: %v, want EOPNOTSUPP", errno)
	}
	if st, _ := os.Stat(outside); st.Mode().Perm() != 0o644 {
		t.Fatalf("the symlink's target changed mode to %v", st.Mode())
	}
}

// TestNodeDirectoryRenamedOrReplaced: operations resolve a directory's
// path afresh after a rename or rmdir inside the dataset, though the
// descriptors of directories are cached.
func TestNodeDirectoryRenamedOrReplaced(t *testing.T) {
	nt := newNodeTest(t, mountConfig{})
	ds := nt.mkdir(t, nt.fsys.root, "ckpt.6").Operations().(*dsNode)
	a := nt.mkdir(t, ds, "a").Operations().(*dsNode)
	nt.writeFile(t, a, "one", []byte("1")) // caches "a"
	if errno := ds.Rename(nt.ctx, "a", ds, "b", 0); errno != 0 {
		t.Fatalf("rename: %v", errno)
	}
	ds.MvChild("a", ds.EmbeddedInode(), "b", true)
	a2 := nt.mkdir(t, ds, "a").Operations().(*dsNode)
	nt.writeFile(t, a2, "two", []byte("2"))
	b := ds.GetChild("b").Operations().(*dsNode)
	nt.writeFile(t, b, "three", []byte("3"))
	cache := filepath.Join(nt.store.CacheDir(), "ckpt.6")
	for p, want := range map[string]string{"a/two": "2", "b/one": "1", "b/three": "3"} {
		if got, err := os.ReadFile(filepath.Join(cache, p)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(cache, "a", "one")); !os.IsNotExist(err) {
		t.Errorf("a/one exists after a was renamed: %v", err)
	}
	// rmdir and mkdir of the same name: the new directory, not the old.
	if errno := a2.Unlink(nt.ctx, "two"); errno != 0 {
		t.Fatal(errno)
	}
	a2.RmChild("two")
	if errno := ds.Rmdir(nt.ctx, "a"); errno != 0 {
		t.Fatalf("rmdir: %v", errno)
	}
	ds.RmChild("a")
	a3 := nt.mkdir(t, ds, "a").Operations().(*dsNode)
	nt.writeFile(t, a3, "four", []byte("4"))
	if got, err := os.ReadFile(filepath.Join(cache, "a", "four")); err != nil || string(got) != "4" {
		t.Errorf("a/four after rmdir and mkdir: %q, %v", got, err)
	}
}

// TestNodeWriteOnlyHandlesBypassPageCache: on the daemon data path a
// write-only open or create is answered with FOPEN_DIRECT_IO, so the
// kernel does not copy each write into a page cache beside the cache file;
// handles that can read keep the page cache, and under passthrough the
// kernel writes the cache file itself.
func TestNodeWriteOnlyHandlesBypassPageCache(t *testing.T) {
	for _, pt := range []bool{false, true} {
		nt := newNodeTest(t, mountConfig{})
		nt.fsys.SetPassthrough(pt)
		ds := nt.mkdir(t, nt.fsys.root, "ckpt.7").Operations().(*dsNode)
		for i, flags := range []uint32{syscall.O_WRONLY, syscall.O_RDWR, syscall.O_WRONLY | syscall.O_TRUNC, syscall.O_RDONLY} {
			want := uint32(0)
			if !pt && flags&syscall.O_ACCMODE == syscall.O_WRONLY {
				want = fuse.FOPEN_DIRECT_IO
			}
			var out fuse.EntryOut
			name := fmt.Sprint("f", i)
			ch, fh, got, errno := ds.Create(nt.ctx, name, flags|syscall.O_CREAT, 0o644, &out)
			if errno != 0 {
				t.Fatalf("create %s: %v", name, errno)
			}
			ds.AddChild(name, ch, true)
			fh.(*handle).Release(nt.ctx)
			if got != want {
				t.Errorf("passthrough=%v: create with %#o answered %#x, want %#x", pt, flags, got, want)
			}
			fh, got, errno = ch.Operations().(*dsNode).Open(nt.ctx, flags)
			if errno != 0 {
				t.Fatalf("open %s: %v", name, errno)
			}
			fh.(*handle).Release(nt.ctx)
			if got != want {
				t.Errorf("passthrough=%v: open with %#o answered %#x, want %#x", pt, flags, got, want)
			}
		}
	}
}

// TestNodeInodeNumberReused: a dataset's directory is gone (the dataset
// failed) while the kernel still refers to its node, and a new dataset's
// directory gets the same inode number from the cache's file system (as
// ext4 and others hand freed numbers out again). The new dataset gets a
// node of its own, writable: go-fuse, which keeps one node per identity,
// used to hand it the gone dataset's, and a mkdir in the new checkpoint
// failed with EROFS. Lookups go through go-fuse's bridge here, as the
// kernel's do, since that is where nodes are matched by identity.
func TestNodeInodeNumberReused(t *testing.T) {
	tm, fsys := newTestFS(t, mountConfig{})
	raw := gofs.NewNodeFS(fsys.root, fsys.NodeOptions())
	lookup := func(name string) *dsNode {
		t.Helper()
		var out fuse.EntryOut
		if st := raw.Lookup(nil, &fuse.InHeader{NodeId: fuse.FUSE_ROOT_ID}, name, &out); st != fuse.OK {
			t.Fatalf("lookup %s: %v", name, st)
		}
		return fsys.root.GetChild(name).Operations().(*dsNode)
	}
	if _, _, err := tm.store.Obtain(cache.Route{Name: "ckpt.1", Kind: cache.KindDir, Root: "ckpt.1"}); err != nil {
		t.Fatal(err)
	}
	lookup("ckpt.1") // the kernel keeps its node
	// The directory, inode number and all, is set aside before the
	// failure moves it to the trash, to come back as ckpt.2's.
	kept := filepath.Join(t.TempDir(), "dir")
	if err := os.Rename(filepath.Join(tm.store.CacheDir(), "ckpt.1"), kept); err != nil {
		t.Fatal(err)
	}
	if err := tm.store.Fail("ckpt.1", "test"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tm.store.Obtain(cache.Route{Name: "ckpt.2", Kind: cache.KindDir, Root: "ckpt.2"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tm.store.CacheDir(), "ckpt.2")
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(kept, dir); err != nil {
		t.Fatal(err)
	}
	n := lookup("ckpt.2")
	if got := n.ds.Name(); got != "ckpt.2" {
		t.Fatalf("ckpt.2's node is bound to dataset %s", got)
	}
	var out fuse.EntryOut
	if _, errno := n.Mkdir(context.Background(), "r0", 0o755, &out); errno != 0 {
		t.Fatalf("mkdir in the new dataset: %v", errno)
	}
}
