package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/atomicfile"
	"github.com/scrfs/scrfs/layout"
)

// Frameworks keep pointer files beside their checkpoints: DeepSpeed's
// latest (the name of the newest global_stepN), Megatron-LM's
// latest_checkpointed_iteration.txt, Lightning's last.ckpt link. Files and
// symlinks at the mount root that no dataset claims are such pointer
// files: the job's, shown on every node (package pointers makes a change
// on one node the job's). They are small, and kept in memory.
//
// Each belongs to the dataset that was the newest when it was written:
// the store keeps, beside that dataset's files, the pointer files as they
// stood after the write (PointersFile). They are flushed and fetched with
// it, and a restart shows those of the newest checkpoint it restored
// (RestorePointers): a pointer never names a checkpoint that is not the
// one restored, or an older one.

// MaxPointerSize bounds a pointer file (EFBIG beyond); MaxPointers and
// MaxPointerBytes how many the root may hold, and their bytes together
// (ENOSPC beyond).
const (
	MaxPointerSize  = 1 << 20
	MaxPointers     = 256
	MaxPointerBytes = 8 << 20
)

// PointersFile is where a dataset's metadata directory keeps the pointer
// files as they stood while it was the newest dataset.
const PointersFile = "pointers.json"

// PointerFile and PointerLink are the types of a pointer file.
const (
	PointerFile = files.Regular
	PointerLink = files.Symlink
)

// Pointer is a pointer file at the mount root: a regular file with its
// bytes, or a symlink.
type Pointer struct {
	Name    string     `json:"name"`
	Type    files.Type `json:"type"`
	Mode    uint32     `json:"mode"`
	UID     uint32     `json:"uid"`
	GID     uint32     `json:"gid"`
	MtimeNs int64      `json:"mtime_ns"`
	Target  string     `json:"target,omitempty"`
	Data    []byte     `json:"data,omitempty"`
}

// ErrPointerTooLarge: a pointer file past MaxPointerSize (EFBIG).
var ErrPointerTooLarge = errors.New("a file at the mount root, a pointer file, is at most 1 MiB")

// ErrTooManyPointers: a pointer file beyond MaxPointers or
// MaxPointerBytes (ENOSPC).
var ErrTooManyPointers = errors.New("the mount root holds at most 256 pointer files, of 8 MiB together")

// Check validates a pointer file from an untrusted source.
func (p *Pointer) Check() error {
	if err := layout.CheckDatasetName(p.Name); err != nil {
		return fmt.Errorf("pointer file: %w", err)
	}
	switch {
	case p.Type != files.Regular && p.Type != files.Symlink:
		return fmt.Errorf("pointer file %q: a %v", p.Name, p.Type)
	case len(p.Data) > MaxPointerSize:
		return fmt.Errorf("pointer file %q: %w", p.Name, ErrPointerTooLarge)
	case p.Type == files.Symlink && (p.Target == "" || strings.ContainsRune(p.Target, 0) || len(p.Data) > 0):
		return fmt.Errorf("pointer file %q: a bad symlink", p.Name)
	case p.Mode&^0o7777 != 0:
		return fmt.Errorf("pointer file %q: mode %#o", p.Name, p.Mode)
	}
	return nil
}

// pointers is the store's pointer files, by name. s.mu protects it.
type pointers map[string]Pointer

// Pointers returns the pointer files, by name.
func (s *Store) Pointers() []Pointer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedPointers(s.pointers)
}

// Pointer returns pointer file name.
func (s *Store) Pointer(name string) (Pointer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pointers[name]
	return p, ok
}

func (ps pointers) bytes() int {
	n := 0
	for _, p := range ps {
		n += len(p.Data)
	}
	return n
}

func sortedPointers(ps pointers) []Pointer {
	out := make([]Pointer, 0, len(ps))
	for _, p := range ps {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Pointer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// NewestDataset returns the name of the newest dataset here (by creation),
// or "": the one a pointer file written now belongs to.
func (s *Store) NewestDataset() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var newest *Dataset
	for _, d := range s.datasets {
		if newest == nil || d.id > newest.id {
			newest = d
		}
	}
	if newest == nil {
		return ""
	}
	return newest.Name()
}

// ChangePointers applies what the job did to the pointer files — put set
// (a file written or a symlink made), remove named, or both (a rename) —
// and keeps them as they stand now with dataset tag (the newest when they
// were changed; "" none). The mount hears an EventPointer for each name
// changed.
func (s *Store) ChangePointers(set []Pointer, remove []string, tag string) error {
	for i := range set {
		if err := set[i].Check(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	next := make(pointers, len(s.pointers))
	for k, v := range s.pointers {
		next[k] = v
	}
	for _, name := range remove {
		delete(next, name)
	}
	for _, p := range set {
		next[p.Name] = p
	}
	if (len(next) > MaxPointers || next.bytes() > MaxPointerBytes) && len(set) > 0 {
		s.mu.Unlock()
		return ErrTooManyPointers
	}
	s.pointers = next
	d := s.datasets[tag]
	snap := sortedPointers(next)
	s.mu.Unlock()
	if d != nil {
		if err := SavePointers(d.Dir(), snap); err != nil {
			s.log.Warn("keep the pointer files with their dataset", "dataset", tag, "err", err)
		}
	}
	for _, name := range remove {
		s.report(Event{Kind: EventPointer, Path: name})
	}
	for _, p := range set {
		s.report(Event{Kind: EventPointer, Path: p.Name})
	}
	return nil
}

// PointerChanged tells the store that the job changed pointer file name
// (node 0 hears every change first): under the rule "pointer" (or
// "pointer:NAME" of this name), every dataset being written completes.
func (s *Store) PointerChanged(name string) {
	if !s.opts.Rules.Pointer && !slices.Contains(s.opts.Rules.Pointers, name) {
		return
	}
	for _, d := range s.Datasets() {
		if d.Writable() {
			s.ruleFired(d, "pointer file "+name)
		}
	}
}

// ServedDatasets returns the recorded datasets here that did not fail,
// newest first (Datasets' order reversed): the checkpoints the job
// serves, whose pointer files a restart shows.
func (s *Store) ServedDatasets() []string {
	s.mu.Lock()
	all := s.sortedLocked()
	s.mu.Unlock()
	var names []string
	for _, d := range slices.Backward(all) {
		if info := d.Info(); info.Seq > 0 && info.State != Failed {
			names = append(names, info.Name)
		}
	}
	return names
}

// DatasetPointers returns the pointer files kept with dataset name, and
// false when it kept none here.
func (s *Store) DatasetPointers(name string) ([]Pointer, bool, error) {
	d := s.Get(name)
	if d == nil {
		return nil, false, nil
	}
	ps, err := LoadPointers(d.Dir())
	return ps, ps != nil, err
}

// KeepPointers keeps ps with dataset name (the job's nodes kept them with
// it: this node rebuilt or fetched it without them).
func (s *Store) KeepPointers(name string, ps []Pointer) error {
	d := s.Get(name)
	if d == nil {
		return fmt.Errorf("keep pointer files with %s: %w", name, ErrNotFound)
	}
	return SavePointers(d.Dir(), ps)
}

// ShowPointers makes ps the pointer files shown: those of the checkpoint
// a restart restored (package pointers decides which).
func (s *Store) ShowPointers(ps []Pointer) {
	s.mu.Lock()
	old := s.pointers
	s.pointers = pointers{}
	for _, p := range ps {
		s.pointers[p.Name] = p
	}
	s.mu.Unlock()
	for name := range old {
		s.report(Event{Kind: EventPointer, Path: name})
	}
	for _, p := range ps {
		s.report(Event{Kind: EventPointer, Path: p.Name})
	}
}

// SavePointers keeps ps, a dataset's pointer files, in its directory dir
// (what a fetch brought with it, or what they are after a change).
func SavePointers(dir string, ps []Pointer) error {
	b, err := EncodePointers(ps)
	if err != nil {
		return err
	}
	meta := layout.DatasetMetaDir(dir)
	if err := os.MkdirAll(meta, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(meta, PointersFile), b, 0o600)
}

// EncodePointers encodes a dataset's pointer files as SavePointers keeps
// them (and the prefix beside the dataset's manifest).
func EncodePointers(ps []Pointer) ([]byte, error) {
	if ps == nil {
		ps = []Pointer{}
	}
	return json.Marshal(struct {
		Version  int       `json:"version"`
		Pointers []Pointer `json:"pointers"`
	}{1, ps})
}

// maxPointersFile bounds what LoadPointers reads: the pointer files'
// bytes in base64, and their names and attributes.
const maxPointersFile = MaxPointerBytes*4/3 + MaxPointers*8<<10

// LoadPointers reads the pointer files kept in dataset directory dir: nil
// when none were.
func LoadPointers(dir string) ([]Pointer, error) {
	b, err := os.ReadFile(filepath.Join(layout.DatasetMetaDir(dir), PointersFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return DecodePointers(b)
}

// DecodePointers decodes and checks a dataset's pointer files as
// SavePointers keeps them (from this node's disk or the prefix).
func DecodePointers(b []byte) ([]Pointer, error) {
	if len(b) > maxPointersFile {
		return nil, fmt.Errorf("pointer files: %d bytes, more than any scrfs writes", len(b))
	}
	var doc struct {
		Version  int       `json:"version"`
		Pointers []Pointer `json:"pointers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("pointer files: %w", err)
	}
	if doc.Version != 1 {
		return nil, fmt.Errorf("pointer files: version %d", doc.Version)
	}
	if len(doc.Pointers) > MaxPointers {
		return nil, fmt.Errorf("pointer files: %d of them: %w", len(doc.Pointers), ErrTooManyPointers)
	}
	bytes := 0
	seen := map[string]bool{}
	for i := range doc.Pointers {
		if err := doc.Pointers[i].Check(); err != nil {
			return nil, err
		}
		if seen[doc.Pointers[i].Name] {
			return nil, fmt.Errorf("pointer file %q twice", doc.Pointers[i].Name)
		}
		seen[doc.Pointers[i].Name] = true
		if bytes += len(doc.Pointers[i].Data); bytes > MaxPointerBytes {
			return nil, fmt.Errorf("pointer files: %w", ErrTooManyPointers)
		}
	}
	if doc.Pointers == nil {
		doc.Pointers = []Pointer{}
	}
	return doc.Pointers, nil
}
