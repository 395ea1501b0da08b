package fs

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/files"
)

// sharedJob is a job of several nodes whose other nodes never made any
// name: the mount shares its names, and every create is this node's.
type sharedJob struct{ alone }

func (sharedJob) Shared() bool { return true }

// listed returns file rel of the list of the dataset's share.
func listed(t *testing.T, nt *nodeTest, dataset, rel string) files.Meta {
	t.Helper()
	list, err := nt.store.Get(dataset).List()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(m files.Meta) bool { return m.Path == rel })
	if i < 0 {
		t.Fatalf("%s/%s not listed: %+v", dataset, rel, list)
	}
	return list[i]
}

// TestNodeSharedWritesTracked: in a dataset several nodes write, the open
// that makes a file is passed through to the kernel, and the file is
// listed whole once it changed through it; a later open is served through
// the daemon, which notes each write's range (and a truncation's cut), and
// the file is listed with those ranges; an open while a passed-through one
// is open is passed through too (the kernel keeps one mode per file).
func TestNodeSharedWritesTracked(t *testing.T) {
	nt := newNodeTest(t, mountConfig{job: sharedJob{}})
	nt.fsys.SetPassthrough(true)
	ds := nt.mkdir(t, nt.fsys.root, "ckpt.1").Operations().(*dsNode)

	var out fuse.EntryOut
	ch, fh, _, errno := ds.Create(nt.ctx, "mpi.dat", syscall.O_RDWR, 0o644, &out)
	if errno != 0 {
		t.Fatal(errno)
	}
	ds.AddChild("mpi.dat", ch, true)
	created := fh.(*handle)
	if _, passed := created.PassthroughFd(); !passed {
		t.Fatal("the open that made the file is not passed through")
	}
	if errno := created.Release(nt.ctx); errno != 0 { // as ROMIO's rank 0 does: made, closed, unwritten
		t.Fatal(errno)
	}
	f := ch.Operations().(*dsNode)
	open := func() *handle {
		t.Helper()
		f.pt.closedAt = time.Time{} // long after the last passed-through release (backingGrace)
		fh, _, errno := f.Open(nt.ctx, syscall.O_RDWR)
		if errno != 0 {
			t.Fatal(errno)
		}
		return fh.(*handle)
	}
	write := func(h *handle, off int64, n int) {
		t.Helper()
		if k, errno := h.Write(nt.ctx, make([]byte, n), off); errno != 0 || int(k) != n {
			t.Fatalf("write %d at %d: %d, %v", n, off, k, errno)
		}
	}
	fh, _, errno = f.Open(nt.ctx, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatal(errno)
	}
	if _, passed := fh.(*handle).PassthroughFd(); passed || time.Since(f.pt.closedAt) < backingGrace {
		t.Fatalf("an open right after a passed-through release: passed through %v, %v after it; want served through the daemon once go-fuse let the passthrough go (%v)",
			passed, time.Since(f.pt.closedAt), backingGrace)
	}
	fh.(*handle).Release(nt.ctx)
	h := open()
	if _, passed := h.PassthroughFd(); passed {
		t.Fatal("a reopen of the file is passed through: its writes would not be known")
	}
	write(h, 1000, 500)
	write(h, 4096, 100)
	write(h, 1500, 100) // touches the first
	var in fuse.SetAttrIn
	in.Valid, in.Size = fuse.FATTR_SIZE, 4146
	var aout fuse.AttrOut
	if errno := h.setattr(&in, &aout); errno != 0 {
		t.Fatal(errno)
	}
	if errno := h.Release(nt.ctx); errno != 0 {
		t.Fatal(errno)
	}
	m := listed(t, nt, "ckpt.1", "mpi.dat")
	if want := []files.Range{{Off: 1000, Len: 600}, {Off: 4096, Len: 50}}; !m.Partial || !slices.Equal(m.Ranges, want) {
		t.Fatalf("listed partial %v, ranges %v; want %v", m.Partial, m.Ranges, want)
	}

	// While a passed-through open is open, the next is passed through too;
	// a file that changed through such an open is listed whole, whatever
	// was noted of it since.
	ch2, fh2, _, errno := ds.Create(nt.ctx, "own.dat", syscall.O_WRONLY, 0o644, &out)
	if errno != 0 {
		t.Fatal(errno)
	}
	ds.AddChild("own.dat", ch2, true)
	own := ch2.Operations().(*dsNode)
	fh3, _, errno := own.Open(context.Background(), syscall.O_WRONLY)
	if errno != 0 {
		t.Fatal(errno)
	}
	forced := fh3.(*handle)
	if _, passed := forced.PassthroughFd(); !passed {
		t.Fatal("an open while another is passed through is not passed through")
	}
	if errno := fh2.(*handle).Release(nt.ctx); errno != 0 {
		t.Fatal(errno)
	}
	write(forced, 0, 10) // the kernel's write to the cache file
	if errno := forced.Release(nt.ctx); errno != 0 {
		t.Fatal(errno)
	}
	f = own
	h = open()
	write(h, 100, 10)
	if errno := h.Release(nt.ctx); errno != 0 {
		t.Fatal(errno)
	}
	if m := listed(t, nt, "ckpt.1", "own.dat"); m.Partial {
		t.Fatalf("a file written through the kernel is listed partial: %+v", m)
	}
}
