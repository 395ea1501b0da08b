package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/record"
)

// Arrivals is the checkpoint a restart fetches from the prefix, which the
// mount shows before its bytes are here (package transfer's arrival):
// every node's files of it, read-only, each read waiting for the blocks
// it needs. While it arrives it takes the place of the cache's dataset of
// that name; once recorded here the cache's shows.
type Arrivals interface {
	// Arrival returns the dataset arriving, nil when none is.
	Arrival() Arrival
}

// Arrival is one dataset arriving from the prefix.
type Arrival interface {
	Route() cache.Route
	// View lists every node's entries; none is local.
	View() *record.View
	// Open returns the file of entry e, filled block by block as it is
	// read.
	Open(ctx context.Context, e *record.Entry) (RemoteFile, error)
}

// arrival returns the dataset arriving, nil when none is. Only a dataset
// with a directory of its own is shown arriving: the files of a flat one
// sit among others'.
func (f *FS) arrival() Arrival {
	if f.arrivals == nil {
		return nil
	}
	if a := f.arrivals.Arrival(); a != nil && a.Route().Kind == cache.KindDir {
		return a
	}
	return nil
}

// arrivalAt returns the dataset arriving whose directory is at mount path
// p, nil when none is.
func (f *FS) arrivalAt(p string) Arrival {
	if a := f.arrival(); a != nil && a.Route().Root == p {
		return a
	}
	return nil
}

// arrivalRoot returns the node of arriving dataset a's directory, a child
// of namespace directory n.
func (n *nsNode) arrivalRoot(ctx context.Context, a Arrival, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	src := arrivalSource{a}
	e, ok := a.View().Lookup(".")
	if !ok {
		return nil, syscall.ENOENT
	}
	fillRemote(e, &out.Attr)
	// Not for long: once recorded, the cache's dataset takes its place
	// (Arrival events make the kernel look again; this bounds a missed one).
	out.SetEntryTimeout(n.fsys.entryTimeout)
	out.SetAttrTimeout(n.fsys.attrTimeout)
	return n.NewInode(ctx, &remoteNode{fsys: n.fsys, src: src, rel: "."}, gofs.StableAttr{Mode: syscall.S_IFDIR}), 0
}

// arrivalChanged makes the kernel look up dataset r's directory again:
// the mount began or stopped showing it arriving.
func (f *FS) arrivalChanged(r cache.Route) {
	f.forget(r)
	f.appeared(r)
}
