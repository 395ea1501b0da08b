package prefix

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/layout"
)

// FormatVersion is the "version" of every JSON file this package writes in
// the prefix. Readers refuse other versions rather than guess.
const FormatVersion = 1

// Manifest is a dataset's merged manifest: what every node flushed. The
// caller owns it.
type Manifest struct {
	Version int
	Dataset string
	Nodes   int       // nodes of the job that flushed it; parts 0..Nodes-1
	Created time.Time // when the merge was written
	Files   int64     // regular files
	Bytes   int64     // their total size
	// Record is the SHA-256 (hex) of the dataset's record kept beside the
	// manifest, "" if there is none (ReadRecord); Pointers that of its
	// pointer files (ReadPointers).
	Record   string
	Pointers string
	// Entries are sorted by path, then node. A directory appears once per
	// node that has it; any other path appears once.
	Entries []Entry
	// SHA256 is the digest (hex) of the manifest file: what the index
	// entry that completed it records (IndexEntry.Manifest).
	SHA256 string
}

// ForNodes returns the entries the given nodes flushed, in manifest order,
// each directory once: the share one node of a smaller job fetches.
func (m *Manifest) ForNodes(nodes []int) []Entry {
	var out []Entry
	dirs := map[string]bool{}
	for _, e := range m.Entries {
		if !slices.Contains(nodes, e.Node) {
			continue
		}
		if e.Type == files.Dir {
			if dirs[e.Path] {
				continue
			}
			dirs[e.Path] = true
		}
		out = append(out, e)
	}
	return out
}

// partHead and manifestHead are the fields before "entries" in the files.
type partHead struct {
	Version int       `json:"version"`
	Dataset string    `json:"dataset"`
	Node    int       `json:"node"`
	Written time.Time `json:"written"`
	Files   int64     `json:"files"`
	Bytes   int64     `json:"bytes"`
}

type manifestHead struct {
	Version  int       `json:"version"`
	Dataset  string    `json:"dataset"`
	Nodes    int       `json:"nodes"`
	Created  time.Time `json:"created"`
	Files    int64     `json:"files"`
	Bytes    int64     `json:"bytes"`
	Record   string    `json:"record,omitempty"`
	Pointers string    `json:"pointers,omitempty"`
}

// encodeDoc writes head's fields followed by "entries", one entry a line, so
// the files stay greppable and diff well. It returns the document without
// its closing brace, for seal to add the MAC.
func encodeDoc(head any, entries []Entry) ([]byte, error) {
	h, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(h) + 160*len(entries))
	b.Write(h[:len(h)-1])
	b.WriteString(`,"entries":[`)
	for i := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n ")
		eb, err := json.Marshal(entries[i])
		if err != nil {
			return nil, err
		}
		b.Write(eb)
	}
	b.WriteString("\n]")
	return b.Bytes(), nil
}

// totals counts the regular files and their bytes.
func totals(es []Entry) (count, bytes int64) {
	for i := range es {
		if es[i].Type == files.Regular {
			count++
			if bytes += es[i].Size; bytes < 0 {
				return count, -1 // overflow: only a corrupt manifest gets here
			}
		}
	}
	return count, bytes
}

// WritePart records node's entries for dataset, signed, durably and
// atomically, replacing an earlier part of the same node. Every node writes
// a part once its Flush returned, even an empty one (a node that wrote
// nothing), since CompleteFlush requires all of them. Entries must carry
// Node == node; they are not modified.
func (p *Prefix) WritePart(ctx context.Context, dataset string, node int, entries []Entry) error {
	where := p.metaLoc(partName(dataset, node))
	if err := layout.CheckDatasetName(dataset); err != nil {
		return fmt.Errorf("write part: %w", err)
	}
	es := append([]Entry(nil), entries...)
	sortEntries(es)
	if err := checkPartEntries(es, node); err != nil {
		return fmt.Errorf("write part %s: %w: %v", where, ErrBadEntry, err)
	}
	files, bytes := totals(es)
	body, err := encodeDoc(partHead{Version: FormatVersion, Dataset: dataset, Node: node,
		Written: time.Now().UTC(), Files: files, Bytes: bytes}, es)
	if err == nil {
		body, err = p.key.seal(kindPart, body)
	}
	if err == nil {
		err = p.s.writeMeta(ctx, partName(dataset, node), body)
	}
	if err != nil {
		return pathErr("write part", where, err)
	}
	return nil
}

// metaLoc names a metadata file in messages.
func (p *Prefix) metaLoc(name string) string { return p.s.locate(layout.MetaDir + "/" + name) }

// readSigned reads metadata file name, decodes it with decode and checks
// its MAC as a thing of kind. A file that does not decode is reported as
// corrupt (ErrBadMetadata) before its MAC is looked at, which is what a
// truncated or damaged file most likely is; one that decodes but is
// refused for its MAC wraps ErrUnverified.
func (p *Prefix) readSigned(ctx context.Context, op, what, kind, name string, decode func([]byte) error) ([]byte, error) {
	where := p.metaLoc(name)
	b, err := p.s.readMeta(ctx, name)
	if err != nil {
		return nil, pathErr(op, where, err)
	}
	if err := decode(b); err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, where, err)
	}
	if t := p.key.open(kind, b); !p.trusted(t) {
		return nil, fmt.Errorf("%s %s: %w", op, where, refusal(what, where, t))
	}
	return b, nil
}

func checkPartEntries(es []Entry, node int) error {
	if node < 0 {
		return fmt.Errorf("negative node %d", node)
	}
	for i := range es {
		if es[i].Node != node {
			return fmt.Errorf("%s: entry of node %d in the part of node %d", es[i].Path, es[i].Node, node)
		}
	}
	return checkEntries(es)
}

// ReadPart returns node's entries of dataset, sorted by path. A missing
// part wraps fs.ErrNotExist; a corrupt one ErrBadMetadata; one whose MAC
// does not verify ErrUnverified.
func (p *Prefix) ReadPart(ctx context.Context, dataset string, node int) ([]Entry, error) {
	var d *partDoc
	_, err := p.readSigned(ctx, "read part", "the manifest part", kindPart, partName(dataset, node), func(b []byte) error {
		var err error
		d, err = decodePart(b)
		if err == nil && (d.head.Dataset != dataset || d.head.Node != node) {
			err = fmt.Errorf("%w: part of dataset %q node %d in the place of %q node %d",
				ErrBadMetadata, d.head.Dataset, d.head.Node, dataset, node)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return d.Entries, nil
}

type partDoc struct {
	head    partHead
	Entries []Entry
}

// decodePart parses and validates a part file's bytes.
func decodePart(b []byte) (*partDoc, error) {
	var w struct {
		partHead
		Version *int    `json:"version"` // present, not defaulted to 0
		Entries []Entry `json:"entries"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	if w.Version == nil || *w.Version != FormatVersion {
		return nil, fmt.Errorf("%w: %s, want version %d", ErrBadMetadata, versionString(w.Version), FormatVersion)
	}
	w.partHead.Version = *w.Version
	if err := layout.CheckDatasetName(w.Dataset); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	if w.Entries == nil {
		return nil, fmt.Errorf("%w: no \"entries\" list", ErrBadMetadata)
	}
	sortEntries(w.Entries)
	if err := checkPartEntries(w.Entries, w.Node); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	if err := checkTotals(w.Entries, w.Files, w.Bytes); err != nil {
		return nil, err
	}
	return &partDoc{head: w.partHead, Entries: w.Entries}, nil
}

func versionString(v *int) string {
	if v == nil {
		return "no version"
	}
	return "version " + strconv.Itoa(*v)
}

// checkTotals compares a file's recorded totals with its entries: a cheap
// guard against a hand-edited or half-merged file.
func checkTotals(es []Entry, files, bytes int64) error {
	f, b := totals(es)
	if b < 0 {
		return fmt.Errorf("%w: sizes add up beyond 2^63 bytes", ErrBadMetadata)
	}
	if f != files || b != bytes {
		return fmt.Errorf("%w: header says %d files and %d bytes, entries hold %d and %d",
			ErrBadMetadata, files, bytes, f, b)
	}
	return nil
}

// mergeManifest reads the parts of nodes 0..nodes-1 of dataset (each
// verified), checks that no path is claimed by two nodes (ErrConflict;
// directories may be shared), writes record and pointers (nil: none)
// beside it and then the merged manifest, signed, with their digests,
// durably and atomically. A missing part is an error wrapping fs.ErrNotExist: the
// merge runs only once every node reported its part durable.
func (p *Prefix) mergeManifest(ctx context.Context, dataset string, nodes int, record, pointers []byte) (*Manifest, error) {
	if err := layout.CheckDatasetName(dataset); err != nil {
		return nil, fmt.Errorf("merge manifest: %w", err)
	}
	if nodes < 1 {
		return nil, fmt.Errorf("merge manifest of %s: %d nodes, need at least 1", dataset, nodes)
	}
	m := &Manifest{Version: FormatVersion, Dataset: dataset, Nodes: nodes, Created: time.Now().UTC()}
	owner := map[string]*Entry{}
	for node := 0; node < nodes; node++ {
		es, err := p.ReadPart(ctx, dataset, node)
		if err != nil {
			return nil, fmt.Errorf("merge manifest of %s: %w", dataset, err)
		}
		for i := range es {
			e := &es[i]
			if prev := owner[e.Path]; prev != nil && (prev.Type != files.Dir || e.Type != files.Dir) {
				return nil, fmt.Errorf("merge manifest of %s: %s: %w (node %d: %s, node %d: %s)",
					dataset, e.Path, ErrConflict, prev.Node, prev.Type, e.Node, e.Type)
			}
			owner[e.Path] = e
		}
		m.Entries = append(m.Entries, es...)
	}
	sortEntries(m.Entries)
	if err := checkEntries(m.Entries); err != nil {
		// Each part was valid alone, so this is one node's link above
		// another node's file.
		return nil, fmt.Errorf("merge manifest of %s: %w: %v", dataset, ErrConflict, err)
	}
	m.Files, m.Bytes = totals(m.Entries)
	if m.Bytes < 0 {
		return nil, fmt.Errorf("merge manifest of %s: sizes add up beyond 2^63 bytes", dataset)
	}
	var err error
	if m.Record, err = p.attach(ctx, "record", recordName(dataset), record); err != nil {
		return nil, err
	}
	if m.Pointers, err = p.attach(ctx, "pointer files", pointersName(dataset), pointers); err != nil {
		return nil, err
	}
	body, err := encodeDoc(manifestHead{Version: m.Version, Dataset: dataset, Nodes: nodes,
		Created: m.Created, Files: m.Files, Bytes: m.Bytes, Record: m.Record, Pointers: m.Pointers}, m.Entries)
	if err == nil {
		body, err = p.key.seal(kindManifest, body)
	}
	if err == nil {
		err = p.s.writeMeta(ctx, manifestName(dataset), body)
	}
	if err != nil {
		return nil, pathErr("merge manifest", p.metaLoc(manifestName(dataset)), err)
	}
	m.SHA256 = digest(body)
	return m, nil
}

// ReadManifest returns dataset's merged manifest, verified: its MAC, and,
// when want is set (the index entry's IndexEntry.Manifest), that it is the
// very manifest the index completed, not an older one of the same dataset.
// A missing one wraps fs.ErrNotExist, a corrupt one ErrBadMetadata, one
// refused ErrUnverified. It does not consult the index: a manifest exists
// before the index calls its dataset complete.
func (p *Prefix) ReadManifest(ctx context.Context, dataset, want string) (*Manifest, error) {
	name := manifestName(dataset)
	var m *Manifest
	b, err := p.readSigned(ctx, "read manifest", "the manifest", kindManifest, name, func(b []byte) error {
		var err error
		m, err = decodeManifest(b)
		if err == nil && m.Dataset != dataset {
			err = fmt.Errorf("%w: manifest of %q in the place of %q", ErrBadMetadata, m.Dataset, dataset)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	m.SHA256 = digest(b)
	if want != "" && m.SHA256 != want {
		return nil, fmt.Errorf("read manifest %s: %w: it is not the manifest the index completed (sha256 %.12s…, index says %.12s…)",
			p.metaLoc(name), ErrUnverified, m.SHA256, want)
	}
	return m, nil
}

// attach writes b (what, nil: nothing) as metadata name beside a
// manifest, and returns the digest the manifest records of it.
func (p *Prefix) attach(ctx context.Context, what, name string, b []byte) (string, error) {
	if b == nil {
		return "", nil
	}
	if err := p.s.writeMeta(ctx, name, b); err != nil {
		return "", pathErr("write "+what, p.metaLoc(name), err)
	}
	return digest(b), nil
}

// attached reads metadata name kept beside a manifest (what), checked
// against the digest want the manifest (verified) records; nil if it
// records none.
func (p *Prefix) attached(ctx context.Context, what, name, want string) ([]byte, error) {
	if want == "" {
		return nil, nil
	}
	b, err := p.s.readMeta(ctx, name)
	if err != nil {
		return nil, pathErr("read "+what, p.metaLoc(name), err)
	}
	if digest(b) != want {
		return nil, fmt.Errorf("read %s %s: %w: its sha256 is not the one its manifest records", what, p.metaLoc(name), ErrUnverified)
	}
	return b, nil
}

// ReadRecord returns the record kept beside manifest m, checked against
// the digest m (verified) records; nil if m records none.
func (p *Prefix) ReadRecord(ctx context.Context, m *Manifest) ([]byte, error) {
	return p.attached(ctx, "record", recordName(m.Dataset), m.Record)
}

// ReadPointers returns the pointer files kept beside manifest m (as the
// cache keeps them with a dataset), checked against the digest m records;
// nil if m records none.
func (p *Prefix) ReadPointers(ctx context.Context, m *Manifest) ([]byte, error) {
	return p.attached(ctx, "pointer files", pointersName(m.Dataset), m.Pointers)
}

// decodeManifest parses and validates a merged manifest's bytes.
func decodeManifest(b []byte) (*Manifest, error) {
	var w struct {
		manifestHead
		Version *int    `json:"version"`
		Entries []Entry `json:"entries"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	if w.Version == nil || *w.Version != FormatVersion {
		return nil, fmt.Errorf("%w: %s, want version %d", ErrBadMetadata, versionString(w.Version), FormatVersion)
	}
	if err := layout.CheckDatasetName(w.Dataset); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	if w.Nodes < 1 {
		return nil, fmt.Errorf("%w: %d nodes", ErrBadMetadata, w.Nodes)
	}
	if !isDigest(w.Record) || !isDigest(w.Pointers) {
		return nil, fmt.Errorf("%w: record %.70q or pointers %.70q is not 64 hex digits", ErrBadMetadata, w.Record, w.Pointers)
	}
	if w.Entries == nil {
		return nil, fmt.Errorf("%w: no \"entries\" list", ErrBadMetadata)
	}
	sortEntries(w.Entries)
	for i := range w.Entries {
		if e := &w.Entries[i]; e.Node >= w.Nodes {
			return nil, fmt.Errorf("%w: %s: node %d of a %d-node manifest", ErrBadMetadata, e.Path, e.Node, w.Nodes)
		}
	}
	if err := checkEntries(w.Entries); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	if err := checkTotals(w.Entries, w.Files, w.Bytes); err != nil {
		return nil, err
	}
	return &Manifest{Version: *w.Version, Dataset: w.Dataset, Nodes: w.Nodes, Created: w.Created,
		Files: w.Files, Bytes: w.Bytes, Record: w.Record, Pointers: w.Pointers, Entries: w.Entries}, nil
}
