package fs

import (
	"context"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/layout"
)

// Lookup finds a namespace subdirectory, a dataset directory anchored here,
// or a flat dataset's file in this directory.
func (n *nsNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (ch *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.observe(opLookup, time.Now(), &errno)
	if child, ok := n.nsChild(name); ok {
		child.fillAttr(&out.Attr)
		return child.EmbeddedInode(), 0
	}
	p := n.childPath(name)
	if err := n.fsys.store.AwaitRestored(ctx, n.mountPath(), p); err != nil {
		return nil, syscall.EINTR // interrupted (Go's and Python's runtimes call again): never ENOENT for a checkpoint on its way
	}
	if a := n.fsys.arrivalAt(p); a != nil {
		return n.arrivalRoot(ctx, a, out)
	}
	if d := n.anchoredDataset(p, true); d != nil {
		return n.datasetRootNode(ctx, d, out)
	}
	if d := n.anchoredDataset(p, false); d != nil {
		e, err := n.fsys.at(d, name)
		if err != nil {
			return nil, n.fsys.toErrno(err)
		}
		defer e.release()
		ch, errno = n.fsys.entryNode(ctx, n.EmbeddedInode(), d, e, out)
		if errno == syscall.ENOENT {
			return n.fsys.remoteChild(ctx, n.EmbeddedInode(), dsSource{n.fsys, d}, name, out)
		}
		return ch, errno
	}
	if n.isPointer(name) {
		return n.pointerChild(ctx, name, out)
	}
	return nil, syscall.ENOENT
}

// datasetRootNode returns the node for the directory of dataset d.
func (n *nsNode) datasetRootNode(ctx context.Context, d *cache.Dataset, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	var st syscall.Stat_t
	if err := syscall.Lstat(d.Dir(), &st); err != nil {
		return nil, n.fsys.toErrno(err)
	}
	out.Attr.FromStat(&st)
	cacheLong(d.Writable(), out)
	return n.NewInode(ctx, &dsNode{fsys: n.fsys, ds: d, root: true}, stableOf(d, &st)), 0
}

// Readdir lists ".", "..", namespace subdirectories and the datasets
// anchored here.
func (n *nsNode) Readdir(ctx context.Context) (ds gofs.DirStream, errno syscall.Errno) {
	defer n.fsys.observe(opReaddir, time.Now(), &errno)
	if err := n.fsys.store.AwaitDecided(ctx); err != nil {
		return nil, syscall.EINTR // interrupted, as above: never an empty mount while the job decides
	}
	var entries []fuse.DirEntry
	for name, ch := range n.Children() {
		if _, ok := ch.Operations().(*nsNode); ok {
			entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: ch.StableAttr().Ino})
		}
	}
	entries = append(entries, n.datasetEntries(ctx)...)
	if n.atRoot() {
		entries = append(entries, n.fsys.pointerEntries()...)
	}
	slices.SortFunc(entries, func(a, b fuse.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	self := n.StableAttr().Ino
	parent := self // the mount root's ".." is its own; the kernel crosses the mount
	if _, p := n.Parent(); p != nil {
		parent = p.StableAttr().Ino
	}
	dots := []fuse.DirEntry{{Name: ".", Mode: syscall.S_IFDIR, Ino: self}, {Name: "..", Mode: syscall.S_IFDIR, Ino: parent}}
	return gofs.NewListDirStream(append(dots, entries...)), 0
}

// datasetEntries lists the dataset directories anchored in n and the files
// of the flat datasets anchored in n.
func (n *nsNode) datasetEntries(ctx context.Context) []fuse.DirEntry {
	here := n.mountPath()
	var entries []fuse.DirEntry
	arriving := ""
	if a := n.fsys.arrival(); a != nil && parentOf(a.Route().Root) == here {
		arriving = a.Route().Root
		entries = append(entries, fuse.DirEntry{Name: path.Base(arriving), Mode: syscall.S_IFDIR})
	}
	for _, d := range n.fsys.store.Datasets() {
		r := d.Route()
		switch {
		case r.Kind == cache.KindDir && r.Root == arriving:
			// Shown arriving until recorded here.
		case r.Kind == cache.KindDir && parentOf(r.Root) == here:
			var st syscall.Stat_t
			if syscall.Lstat(d.Dir(), &st) == nil {
				entries = append(entries, fuse.DirEntry{Name: path.Base(r.Root), Mode: syscall.S_IFDIR, Ino: st.Ino})
			}
		case r.Kind == cache.KindFlat && r.Root == here:
			des, err := os.ReadDir(d.Dir())
			if err != nil {
				continue
			}
			local := map[string]bool{}
			for _, de := range des {
				if de.Name() == layout.MetaDir {
					continue
				}
				var ino uint64
				if info, err := de.Info(); err == nil {
					ino = info.Sys().(*syscall.Stat_t).Ino
				}
				entries = append(entries, fuse.DirEntry{Name: de.Name(), Mode: modeOf(de.Type()), Ino: ino})
				local[de.Name()] = true
			}
			entries = append(entries, n.fsys.remoteEntries(dsSource{n.fsys, d}, ".", local)...)
		}
	}
	return entries
}

// parentOf is path.Dir for mount-relative paths, with "" for the root.
func parentOf(p string) string {
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}

// modeOf converts an fs.FileMode type to S_IF* bits for directory entries.
func modeOf(t os.FileMode) uint32 {
	switch {
	case t&os.ModeDir != 0:
		return syscall.S_IFDIR
	case t&os.ModeSymlink != 0:
		return syscall.S_IFLNK
	case t&os.ModeNamedPipe != 0:
		return syscall.S_IFIFO
	case t&os.ModeSocket != 0:
		return syscall.S_IFSOCK
	case t&os.ModeDevice != 0 && t&os.ModeCharDevice != 0:
		return syscall.S_IFCHR
	case t&os.ModeDevice != 0:
		return syscall.S_IFBLK
	}
	return syscall.S_IFREG
}

// ensureNS returns the namespace directory at mount path p, creating
// in-memory nodes for it and its parents when missing. The daemon calls it
// for datasets that appear without the application making their parents
// (restart, a dataset another node started).
func (f *FS) ensureNS(ctx context.Context, p string) *nsNode {
	cur := f.root
	if p == "" {
		return cur
	}
	for _, name := range splitPath(p) {
		child, ok := cur.nsChild(name)
		if !ok {
			child = f.newNSNode(0o755)
			cur.AddChild(name, cur.NewPersistentInode(ctx, child, gofs.StableAttr{Mode: syscall.S_IFDIR}), false)
			if c, ok := cur.nsChild(name); ok {
				child = c
			}
		}
		cur = child
	}
	return cur
}

// splitPath splits a mount-relative path into its components.
func splitPath(p string) []string { return strings.Split(p, "/") }
