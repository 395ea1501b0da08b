package transfer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/prefix"
	"github.com/scrfs/scrfs/record"
)

// A checkpoint the restore fetches from the prefix is shown in the mount
// the moment this node has read its manifest, before its bytes are here:
// a framework that looks for its newest checkpoint at start finds it, and
// a rank reads its first bytes at once. Every node's files of it are
// listed (the manifest says what each node flushed); a read waits only
// for the blocks it asks for. A block the background fetch has not
// brought yet is read from the prefix first and checked against the
// manifest's CRC of that block (prefix.ReadBlock), written where the
// fetch puts it, and served. Files the fetch brings to this node are read
// into their staged copies (the fetch then passes over them), the others
// into scratch files of their own. The arrival ends when the fetched
// dataset is recorded here (the mount then shows it as any recorded
// dataset), when the prefix's copy is found bad, or when the restore
// gives up on it: the mount stops showing it, and a read of a block not
// yet here fails loudly if the prefix's copy does (EIO), never with wrong
// bytes.
//
// A checkpoint flushed before manifests had block CRCs is not shown
// early (its large files can be checked only whole), nor is one routed
// as files in a shared directory: the mount waits for them as before.

// Arrival is a dataset being fetched at the start, as the mount shows it.
type Arrival struct {
	// Route is where it sits in the mount; View is every node's entries,
	// none of them local.
	Route cache.Route
	View  *record.View

	f       *Flusher
	dataset string
	scratch string // where files of other nodes are read into

	files     map[string]*arrivingFile // regular files by path; fixed once made
	committed atomic.Bool              // adopted into the cache here
}

// arrivingFile is one regular file of an arrival and the blocks of it
// here.
type arrivingFile struct {
	a      *Arrival
	e      prefix.Entry
	staged string // this node's staged copy, "" for another node's file

	mu      sync.Mutex
	fd      int // the copy; -1 until first opened (another node's file)
	refs    int // opens, and the arrival's own while it lasts
	landed  []bool
	pending map[int]chan struct{} // blocks being read from the prefix, closed when done
}

// arrivable says whether every file of man can be served block by block.
func arrivable(man *prefix.Manifest) bool {
	for i := range man.Entries {
		e := &man.Entries[i]
		if e.Type == files.Regular && !e.BlockChecked() {
			return false
		}
	}
	return true
}

// newArrival makes the arrival of the dataset m fetches with manifest
// man: mine are the entries this node fetches into staging, whose regular
// files it creates there at full size.
func (f *Flusher) newArrival(m fetchMsg, man *prefix.Manifest, mine []prefix.Entry, staging string) (*Arrival, error) {
	a := &Arrival{Route: m.route(), View: arrivalView(m, man), f: f, dataset: m.Dataset,
		scratch: filepath.Dir(staging), files: map[string]*arrivingFile{}}
	own := map[string]bool{}
	for _, e := range mine {
		own[e.Path] = true
	}
	for _, e := range man.Entries {
		if e.Type != files.Regular {
			continue
		}
		af := &arrivingFile{a: a, e: e, fd: -1, refs: 1, landed: make([]bool, prefix.BlockCount(e.Size)), pending: map[int]chan struct{}{}}
		if own[e.Path] {
			af.staged = filepath.Join(staging, e.Path)
			if err := af.create(); err != nil {
				a.release()
				return nil, err
			}
		}
		a.files[e.Path] = af
	}
	return a, nil
}

// arrivalView is the view of every node's entries in man, the dataset
// directory with the mode its record gave it.
func arrivalView(m fetchMsg, man *prefix.Manifest) *record.View {
	rec := &record.Record{Dataset: m.Dataset, Kind: m.Kind, Root: m.Root, Seq: m.Seq, Completed: m.Completed}
	byNode := map[int]int{}
	for _, e := range man.Entries {
		i, ok := byNode[e.Node]
		if !ok {
			i = len(rec.Members)
			byNode[e.Node] = i
			rec.Members = append(rec.Members, record.Member{Node: e.Node, ID: fmt.Sprintf("prefix-part-%d", e.Node)})
		}
		rec.Members[i].Files = append(rec.Members[i].Files, e.Meta)
	}
	if mode := m.RootMode; mode != 0 && len(rec.Members) > 0 {
		rec.Members[0].Files = append(rec.Members[0].Files, files.Meta{Path: ".", Type: files.Dir, Mode: mode})
	}
	return record.NewView(rec, "")
}

// create makes the staged copy at full size, its directories owner-only
// as the fetch makes them, and keeps it open.
func (af *arrivingFile) create() error {
	if err := os.MkdirAll(filepath.Dir(af.staged), 0o700); err != nil {
		return fmt.Errorf("show %s before it is fetched: %w", af.a.dataset, err)
	}
	fd, err := openSized(af.staged, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, af.e.Size)
	if err != nil {
		return fmt.Errorf("show %s before it is fetched: %s: %w", af.a.dataset, af.staged, err)
	}
	af.fd = fd
	return nil
}

// adoptedCopy opens the file's copy in the cache, where the fetch's
// commit moved it whole.
func (af *arrivingFile) adoptedCopy() error {
	a := af.a
	d := a.f.o.Store.Get(a.dataset)
	if d == nil {
		return fmt.Errorf("open %s/%s: the checkpoint is no longer in the cache: %w", a.dataset, af.e.Path, os.ErrNotExist)
	}
	fd, err := unix.Open(filepath.Join(d.Dir(), af.e.Path), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("open %s/%s in the cache: %w", a.dataset, af.e.Path, err)
	}
	af.fd = fd
	for b := range af.landed {
		af.landed[b] = true
	}
	return nil
}

// scratchFile opens an unnamed file for another node's file, gone with
// its last descriptor.
func (af *arrivingFile) scratchFile() error {
	fd, err := openSized(af.a.scratch, unix.O_TMPFILE, af.e.Size)
	if err != nil {
		return fmt.Errorf("read %s/%s from the prefix: a scratch file in %s: %w", af.a.dataset, af.e.Path, af.a.scratch, err)
	}
	af.fd = fd
	return nil
}

// openSized opens path for reading and writing with flags besides, its
// size set to size.
func openSized(path string, flags int, size int64) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|flags, 0o600)
	if err != nil {
		return -1, err
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Open opens file e of the arrival for reading.
func (a *Arrival) Open(ctx context.Context, e *record.Entry) (*ArrivingFile, error) {
	af := a.files[e.Path]
	if af == nil {
		return nil, fmt.Errorf("open %s/%s: %w", a.dataset, e.Path, os.ErrNotExist)
	}
	af.mu.Lock()
	defer af.mu.Unlock()
	switch {
	case af.fd < 0 && af.staged != "":
		// The arrival ended, its copy adopted into the cache whole; the
		// kernel may still know the file by this node of it a moment.
		if err := af.adoptedCopy(); err != nil {
			return nil, err
		}
	case af.fd < 0:
		if err := af.scratchFile(); err != nil {
			return nil, err
		}
	}
	fd, err := unix.Dup(af.fd)
	if err != nil {
		return nil, fmt.Errorf("open %s/%s: %w", a.dataset, e.Path, err)
	}
	unix.CloseOnExec(fd)
	af.refs++
	return &ArrivingFile{af: af, fd: fd}, nil
}

// landed hears from the fetch that block b of this node's file at path
// is in its staged copy, checked.
func (a *Arrival) landed(path string, b int) {
	if af := a.files[path]; af != nil {
		af.mu.Lock()
		af.landed[b] = true
		af.mu.Unlock()
	}
}

// has reports whether block b of this node's file at path is in its
// staged copy (read ahead of the fetch): the fetch passes over it.
func (a *Arrival) has(path string, b int) bool {
	af := a.files[path]
	if af == nil {
		return false
	}
	af.mu.Lock()
	defer af.mu.Unlock()
	return af.landed[b]
}

// release ends the arrival's own hold on its files: each file's copy is
// closed with its last open.
func (a *Arrival) release() {
	for _, af := range a.files {
		af.unref()
	}
}

func (af *arrivingFile) unref() {
	af.mu.Lock()
	defer af.mu.Unlock()
	if af.refs--; af.refs == 0 && af.fd >= 0 {
		unix.Close(af.fd)
		af.fd = -1
	}
}

// ArrivingFile is one open of a file of an arrival.
type ArrivingFile struct {
	af *arrivingFile
	fd int
}

// Fd is the copy the file's blocks are in once Await returned.
func (h *ArrivingFile) Fd() uintptr { return uintptr(h.fd) }

// Whole reports whether every block of the file is here.
func (h *ArrivingFile) Whole() bool {
	h.af.mu.Lock()
	defer h.af.mu.Unlock()
	for _, ok := range h.af.landed {
		if !ok {
			return false
		}
	}
	return true
}

// Close ends the open.
func (h *ArrivingFile) Close() {
	unix.Close(h.fd)
	h.af.unref()
}

// Await waits until the n bytes at off (fewer at the end of the file) are
// in the copy, reading the blocks not here yet from the prefix, and
// returns how many there are.
func (h *ArrivingFile) Await(ctx context.Context, off int64, n int) (int, error) {
	end := min(off+int64(n), h.af.e.Size)
	if off >= end {
		return 0, nil
	}
	for b := int(off / prefix.BlockSize); int64(b)*prefix.BlockSize < end; b++ {
		if err := h.af.ensure(ctx, h.fd, b); err != nil {
			return 0, err
		}
	}
	return int(end - off), nil
}

// ensure brings block b into the copy (through fd) unless it is there or
// on its way.
func (af *arrivingFile) ensure(ctx context.Context, fd, b int) error {
	for {
		af.mu.Lock()
		if af.landed[b] {
			af.mu.Unlock()
			return nil
		}
		if ch := af.pending[b]; ch != nil {
			af.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		ch := make(chan struct{})
		af.pending[b] = ch
		af.mu.Unlock()
		err := af.read(ctx, fd, b)
		af.mu.Lock()
		delete(af.pending, b)
		af.landed[b] = af.landed[b] || err == nil
		af.mu.Unlock()
		close(ch)
		return err
	}
}

// read reads block b from the prefix, checked, into the copy.
func (af *arrivingFile) read(ctx context.Context, fd, b int) error {
	f := af.a.f
	start := time.Now()
	buf := f.blockBufs.Get().(*[]byte)
	defer f.blockBufs.Put(buf)
	data, err := f.prefix.ReadBlock(ctx, af.a.dataset, &af.e, b, *buf)
	if err == nil {
		_, err = unix.Pwrite(fd, data, int64(b)*prefix.BlockSize)
	}
	switch {
	case err == nil:
		f.met.demand.Add(float64(len(data)))
		f.log.Debug("block read ahead of the fetch", "dataset", af.a.dataset, "path", af.e.Path, "block", b,
			"seconds", time.Since(start).Seconds())
		return nil
	case errors.Is(err, context.Canceled):
		return err
	}
	f.log.Error("a block of a checkpoint being fetched could not be read: the read fails", "dataset", af.a.dataset,
		"path", af.e.Path, "block", b, "err", err)
	return err
}

// Arrival returns the dataset being fetched at the start as the mount
// shows it, nil when none is.
func (f *Flusher) Arrival() *Arrival {
	f.fetch.mu.Lock()
	defer f.fetch.mu.Unlock()
	return f.fetch.arrival
}

// arrivalOf returns the arrival shown if it is dataset name's.
func (f *Flusher) arrivalOf(name string) *Arrival {
	if a := f.Arrival(); a != nil && a.dataset == name {
		return a
	}
	return nil
}

// showArrival makes a the arrival the mount shows, with its pointer files
// ps: the job decided, and this is what it restores.
func (f *Flusher) showArrival(a *Arrival, ps []cache.Pointer) {
	f.fetch.mu.Lock()
	old := f.fetch.arrival
	f.fetch.arrival = a
	f.fetch.mu.Unlock()
	if old != nil {
		old.release()
	}
	if ps != nil {
		f.o.Store.ShowPointers(ps)
	}
	f.o.Store.ArrivalChanged(a.Route)
	f.o.Store.Decided()
	f.log.Info("the mount shows the checkpoint being fetched; reads wait for their blocks", "dataset", a.dataset)
}

// endArrival stops showing the arrival of dataset name, if it is shown:
// it is recorded here now, or its fetch failed.
func (f *Flusher) endArrival(name string) {
	f.fetch.mu.Lock()
	a := f.fetch.arrival
	if a == nil || a.dataset != name {
		f.fetch.mu.Unlock()
		return
	}
	f.fetch.arrival = nil
	f.fetch.mu.Unlock()
	a.release()
	f.o.Store.ArrivalChanged(a.Route)
}

// Recorded tells the flusher that dataset name is recorded here: if it
// was arriving, the mount shows it as recorded from now on.
func (f *Flusher) Recorded(name string) { f.endArrival(name) }

// adopted marks the arrival of dataset name adopted into the cache here:
// should it leave the cache again, it is no longer shown either.
func (f *Flusher) adopted(name string) {
	if a := f.arrivalOf(name); a != nil {
		a.committed.Store(true)
	}
}

// goneArrival ends the arrival of a dataset that left the cache after
// it was adopted (a Drop before the adoption is of another copy).
func (f *Flusher) goneArrival(name string) {
	if a := f.arrivalOf(name); a != nil && a.committed.Load() {
		f.endArrival(name)
	}
}
