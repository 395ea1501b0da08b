package fs

import (
	"context"
	"path"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/scrfs/scrfs/cache"
)

// forget drops a dataset that left the cache (evicted, failed) from the node
// tree and from the kernel's name cache, so the next lookup asks the store
// again instead of finding a stale entry. It returns at once; the kernel is
// notified from another goroutine because a notification sent while a FUSE
// request is being served may wait for that very request.
func (f *FS) forget(r cache.Route) {
	f.dirs.drop(r.Name)
	dir := r.Root
	if r.Kind == cache.KindDir {
		dir = parentOf(r.Root)
	}
	parent, ok := f.findNS(dir)
	if !ok {
		return
	}
	var names []string
	if r.Kind == cache.KindDir {
		names = []string{path.Base(r.Root)}
	} else {
		for name, ch := range parent.Children() {
			if d := datasetOf(ch); d != nil && d.Name() == r.Name {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return // go-fuse's RmChild of no name breaks on a tree not mounted yet
	}
	parent.RmChild(names...)
	if f.server.Load() == nil {
		return
	}
	go func() {
		for _, name := range names {
			parent.NotifyEntry(name)
		}
	}()
}

// appeared tells the kernel that dataset r now exists although the
// application did not create it through this mount (another node started
// it, a fetch or rebuild restored it), so a cached "no such file" is
// dropped. It creates the namespace directories above it as needed.
func (f *FS) appeared(r cache.Route) {
	dir := r.Root
	if r.Kind == cache.KindDir {
		dir = parentOf(r.Root)
	}
	parent := f.ensureNS(context.Background(), dir)
	if f.server.Load() == nil || r.Kind != cache.KindDir {
		return
	}
	go parent.NotifyEntry(path.Base(r.Root))
}

// datasetOf returns the dataset node ch belongs to, or nil for a
// namespace directory.
func datasetOf(ch *gofs.Inode) *cache.Dataset {
	switch n := ch.Operations().(type) {
	case *dsNode:
		return n.ds
	case *remoteNode:
		return n.src.dataset()
	}
	return nil
}

// findNS returns the namespace directory at mount path p, if it exists.
func (f *FS) findNS(p string) (*nsNode, bool) {
	cur := f.root
	if p == "" {
		return cur, true
	}
	for _, name := range splitPath(p) {
		child, ok := cur.nsChild(name)
		if !ok {
			return nil, false
		}
		cur = child
	}
	return cur, true
}
