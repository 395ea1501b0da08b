package fs

import (
	"sync"
	"syscall"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/internal/beneath"
	"golang.org/x/sys/unix"
)

// dirCache keeps O_PATH descriptors of the directories inside datasets that
// operations use, so naming an entry relative to its directory costs no
// system call beyond the operation itself (opening and closing the parent
// for every lookup and create would cost two more each). The dataset's own
// directory (its anchor, "") follows the dataset through renames and stays
// until the dataset leaves the cache; the descriptors of directories inside
// it are keyed by their path in the dataset, so they are dropped whenever a
// rename or rmdir inside the dataset may have changed what a path names.
//
// A descriptor is closed only when nobody holds it: an operation in flight
// keeps using the directory it resolved even if the cache drops it meanwhile.
type dirCache struct {
	mu   sync.Mutex
	sets map[*cache.Dataset]map[string]*dirFD // by dataset, by path in it
}

// dirFD is one cached directory descriptor.
type dirFD struct {
	c  *dirCache
	fd int
	// refs counts the holders: the cache while the descriptor is in it,
	// and every entry resolved through it and not yet released. c.mu
	// protects it.
	refs int
}

// maxCachedDirs bounds the directories cached per dataset; beyond it the
// dataset's cache starts over (checkpoints rarely have more directories
// than ranks, and re-opening one costs a system call).
const maxCachedDirs = 1024

// get returns the descriptor of directory rel of dataset d ("" for the
// dataset's directory), held until released.
func (c *dirCache) get(d *cache.Dataset, rel string) (*dirFD, error) {
	c.mu.Lock()
	if ref, ok := c.sets[d][rel]; ok {
		ref.refs++
		c.mu.Unlock()
		return ref, nil
	}
	c.mu.Unlock()
	fd, err := c.open(d, rel)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ref, ok := c.sets[d][rel]; ok { // opened meanwhile by another operation
		syscall.Close(fd)
		ref.refs++
		return ref, nil
	}
	if c.sets == nil {
		c.sets = map[*cache.Dataset]map[string]*dirFD{}
	}
	set := c.sets[d]
	if set == nil {
		set = map[string]*dirFD{}
		c.sets[d] = set
	}
	if len(set) >= maxCachedDirs {
		c.dropLocked(set, false)
	}
	ref := &dirFD{c: c, fd: fd, refs: 2} // the cache's and the caller's
	set[rel] = ref
	return ref, nil
}

// open opens directory rel of dataset d, beneath its anchor.
func (c *dirCache) open(d *cache.Dataset, rel string) (int, error) {
	if rel == "" {
		return syscall.Open(d.Dir(), unix.O_PATH|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	}
	anchor, err := c.get(d, "")
	if err != nil {
		return -1, err
	}
	defer anchor.release()
	return beneath.OpenDir(anchor.fd, rel)
}

// release lets go of one hold on the descriptor.
func (r *dirFD) release() {
	if r == nil {
		return
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.unrefLocked()
}

func (r *dirFD) unrefLocked() {
	r.refs--
	if r.refs == 0 {
		syscall.Close(r.fd)
	}
}

// dropLocked removes the directories of set from the cache, and its anchor
// too when all is set. c.mu must be held.
func (c *dirCache) dropLocked(set map[string]*dirFD, all bool) {
	for rel, ref := range set {
		if rel == "" && !all {
			continue
		}
		delete(set, rel)
		ref.unrefLocked()
	}
}

// renamed forgets the directories inside dataset d: a rename or rmdir may
// have changed what their paths name.
func (c *dirCache) renamed(d *cache.Dataset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if set := c.sets[d]; set != nil {
		c.dropLocked(set, false)
	}
}

// drop forgets every descriptor of the datasets called name: they left the
// cache (or were replaced).
func (c *dirCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for d, set := range c.sets {
		if d.Name() == name {
			c.dropLocked(set, true)
			delete(c.sets, d)
		}
	}
}
