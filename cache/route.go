package cache

import (
	"fmt"
	"path"
	"regexp"

	"github.com/scrfs/scrfs/layout"
)

// Kind says how a dataset's files sit in the mount.
type Kind string

const (
	// KindDir: the dataset owns one directory of the mount (its Root) and
	// everything below it. The default rule makes every top-level directory one.
	KindDir Kind = layout.RouteDir
	// KindFlat: the dataset's files sit directly in a shared directory (its
	// Root), next to other datasets' files, e.g. ckpt/step_100_rank_3.bin.
	KindFlat Kind = layout.RouteFlat
)

// Route says which dataset a new mount path belongs to.
type Route struct {
	Name string // dataset name, from the rule's named group
	Kind Kind
	// Root is the mount-relative directory the dataset is anchored at: the
	// dataset directory itself for KindDir, the shared directory for KindFlat
	// ("" is the mount root). The dataset's cache directory holds the tree
	// below Root.
	Root string
}

// Router decides routes from the datasets.match rule: a regular expression
// with a named group "dataset", matched against the mount-relative path of a
// new entry (directories with a trailing slash).
type Router struct {
	re    *regexp.Regexp
	group int
}

// NewRouter compiles nothing itself: re must have a group named "dataset".
func NewRouter(re *regexp.Regexp) (*Router, error) {
	g := re.SubexpIndex("dataset")
	if g < 0 {
		return nil, fmt.Errorf("datasets.match %q has no named group (?P<dataset>...)", re)
	}
	return &Router{re: re, group: g}, nil
}

// Route returns the dataset a new entry at mount-relative path p (no leading
// slash) would belong to, if it starts one. A directory routes to a KindDir
// dataset only when the group spans its whole last component; any other
// directory is a plain namespace directory (ErrNoDataset, which callers treat
// as "not a dataset" for mkdir). A file, symlink or other entry routes to a
// KindFlat dataset anchored at its parent directory.
func (r *Router) Route(p string, dir bool) (Route, error) {
	subject := p
	if dir {
		subject += "/"
	}
	m := r.re.FindStringSubmatchIndex(subject)
	if m == nil || m[2*r.group] < 0 {
		return Route{}, ErrNoDataset
	}
	start, end := m[2*r.group], m[2*r.group+1]
	name := subject[start:end]
	if err := layout.CheckDatasetName(name); err != nil {
		return Route{}, fmt.Errorf("%s: %w (%v)", p, ErrNoDataset, err)
	}
	parent, lastStart := path.Dir(p), 0
	if parent == "." {
		parent = ""
	} else {
		lastStart = len(parent) + 1
	}
	if dir {
		if start != lastStart || end != len(p) {
			return Route{}, ErrNoDataset
		}
		return Route{Name: name, Kind: KindDir, Root: p}, nil
	}
	if start < lastStart {
		// The group lies in a directory above the file; such a path can
		// only be inside a dataset directory, never start one here.
		return Route{}, ErrNoDataset
	}
	return Route{Name: name, Kind: KindFlat, Root: parent}, nil
}
