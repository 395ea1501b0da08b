package fs

import (
	"sync"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/files"
)

// A dataset that several nodes write may have one file written on several
// of them (an MPI-IO or parallel HDF5 checkpoint: rank 0 creates the file,
// every rank opens it and writes its part). Each node's bytes stay in its
// own copy; once the dataset completes the file is the union of what every
// node wrote, so each node must know exactly which bytes it wrote (package
// cache, written.go).
//
// The daemon knows that only of what passes through it. So inside such a
// dataset a handle is passed through to the kernel only when its open made
// the file here (a file one rank writes alone, which keeps the fast path);
// every other open — of a file another node created, or reopened — is
// served through the daemon, which notes each write's range. A file that a
// passed-through handle may have changed counts as written whole here.
//
// The kernel keeps one I/O mode per inode: while one open of it is passed
// through, go-fuse passes every new open through too, whatever the handle
// asks. ptOpens counts those opens so the handle knows. go-fuse drops the
// inode's passthrough only after Release returns, so an open that comes
// within backingGrace of the last passed-through release waits that long
// (ROMIO's rank 0 makes the file, closes it, and opens it again at once);
// and a handle served through the daemon that saw no write while its
// file changed says so at release (bypassed): the file then counts as
// written whole.

// ptOpens counts a dataset file's open handles passed through to the
// kernel, and holds the trackers of those that are not.
type ptOpens struct {
	mu       sync.Mutex
	passed   int
	closedAt time.Time // of the last passed-through open
	live     map[*tracker]bool
}

// backingGrace is how long after a passed-through open's release an open
// of the file served through the daemon waits: far longer than go-fuse
// takes to drop the inode's passthrough once Release returned.
const backingGrace = 20 * time.Millisecond

// stamp is what a file's attributes say of whether it changed.
type stamp struct {
	size         int64
	mtime, ctime syscall.Timespec
}

func stampOf(fd int) (stamp, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return stamp{}, err
	}
	return stamp{size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, nil
}

// tracker collects the ranges one handle writes through the daemon.
// Writes on a handle arrive concurrently.
type tracker struct {
	mu      sync.Mutex
	written files.Ranges
	changes int // writes, truncations and allocations seen
}

func (t *tracker) wrote(off, n int64) {
	t.mu.Lock()
	t.written.Add(off, n)
	t.changes++
	t.mu.Unlock()
}

// truncated notes a change of the file's size through the handle.
func (t *tracker) truncated(size int64) {
	t.mu.Lock()
	t.written.Truncate(size)
	t.changes++
	t.mu.Unlock()
}

// openMode decides whether an open of n is passed through to the kernel
// (see above): fresh says the open makes the file here. It counts a
// passed-through open, which release must undo.
func (n *dsNode) openMode(fresh bool) (passed bool) {
	f := n.fsys
	if !f.passthrough.Load() {
		return false
	}
	n.pt.mu.Lock()
	defer n.pt.mu.Unlock()
	if !fresh && f.namesShared(n.ds) {
		for n.pt.passed == 0 {
			wait := backingGrace - time.Since(n.pt.closedAt)
			if wait <= 0 {
				return false
			}
			n.pt.mu.Unlock()
			time.Sleep(wait)
			n.pt.mu.Lock()
		}
	}
	n.pt.passed++
	return true
}

// tracking returns a new tracker of writes to n, which closed drops.
func (n *dsNode) tracking() *tracker {
	t := &tracker{}
	n.pt.mu.Lock()
	defer n.pt.mu.Unlock()
	if n.pt.live == nil {
		n.pt.live = map[*tracker]bool{}
	}
	n.pt.live[t] = true
	return t
}

// closed undoes what an open of n counted: a passed-through open, the
// tracker of one that was not.
func (n *dsNode) closed(passed bool, t *tracker) {
	n.pt.mu.Lock()
	defer n.pt.mu.Unlock()
	if passed {
		n.pt.passed--
		n.pt.closedAt = time.Now()
	}
	delete(n.pt.live, t)
}

// truncated notes that n's file was cut (or grown) to size, by any open
// or by path: what its open handles and closed ones wrote beyond it is
// gone.
func (n *dsNode) truncated(size int64) {
	n.pt.mu.Lock()
	for t := range n.pt.live {
		t.truncated(size)
	}
	n.pt.mu.Unlock()
	if rel, ok := n.rel(); ok {
		n.ds.Truncated(rel, size)
	}
}

// tells reports what handle h, about to be released, wrote to the dataset,
// when its dataset is one whose files may be written on several nodes.
func (h *handle) tell(rel string) {
	if !h.write || (h.track == nil && !h.shared) {
		return
	}
	now, err := stampOf(h.fd)
	changed := err != nil || now != h.stamp0
	if h.track == nil { // passed through: the daemon saw nothing
		if changed {
			h.node.ds.Wrote(rel, nil, true)
		}
		return
	}
	h.track.mu.Lock()
	defer h.track.mu.Unlock()
	h.node.ds.Wrote(rel, &h.track.written, changed && h.track.changes == 0)
}
