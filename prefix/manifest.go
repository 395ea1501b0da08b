package prefix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
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
	// Entries are sorted by path, then node. A directory appears once per
	// node that has it; any other path appears once.
	Entries []Entry
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

// ManifestDir returns <prefix>/.scrfs/manifests/<dataset>, the directory of
// everything scrfs records about one flushed dataset: the node parts and the
// merged manifest.
func ManifestDir(prefix, dataset string) string {
	return filepath.Join(layout.PrefixMetaDir(prefix), "manifests", dataset)
}

// PartPath returns where node's part of dataset's manifest lives.
func PartPath(prefix, dataset string, node int) string {
	return filepath.Join(ManifestDir(prefix, dataset), "node."+strconv.Itoa(node)+".json")
}

// ManifestPath returns where dataset's merged manifest lives.
func ManifestPath(prefix, dataset string) string {
	return filepath.Join(ManifestDir(prefix, dataset), "manifest.json")
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
	Version int       `json:"version"`
	Dataset string    `json:"dataset"`
	Nodes   int       `json:"nodes"`
	Created time.Time `json:"created"`
	Files   int64     `json:"files"`
	Bytes   int64     `json:"bytes"`
}

// encodeDoc writes head's fields followed by "entries", one entry a line, so
// the files stay greppable and diff well.
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
	b.WriteString("\n]}\n")
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

// WritePart records node's entries for dataset, durably and atomically,
// replacing an earlier part of the same node. Every node writes a part once
// its Flush returned, even an empty one (a node that wrote nothing), since
// MergeManifest requires all of them. Entries must carry Node == node; they
// are not modified.
func WritePart(prefix, dataset string, node int, entries []Entry) error {
	path := PartPath(prefix, dataset, node)
	if err := layout.CheckDatasetName(dataset); err != nil {
		return fmt.Errorf("write part %s: %w", path, err)
	}
	es := append([]Entry(nil), entries...)
	sortEntries(es)
	if err := checkPartEntries(es, node); err != nil {
		return fmt.Errorf("write part %s: %w: %v", path, ErrBadEntry, err)
	}
	files, bytes := totals(es)
	b, err := encodeDoc(partHead{Version: FormatVersion, Dataset: dataset, Node: node,
		Written: time.Now().UTC(), Files: files, Bytes: bytes}, es)
	if err != nil {
		return fmt.Errorf("write part %s: %w", path, err)
	}
	if err := mkdirAllSync(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write part of node %d: %w", node, err)
	}
	if err := removeStaleTmp(path); err != nil {
		return fmt.Errorf("write part of node %d: %w", node, err)
	}
	if err := writeFileAtomic(path, b, 0o644); err != nil {
		return fmt.Errorf("write part of node %d: %w", node, err)
	}
	return nil
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

// ReadPart returns node's entries of dataset, sorted by path. A missing part
// wraps fs.ErrNotExist; a corrupt one ErrBadMetadata.
func ReadPart(prefix, dataset string, node int) ([]Entry, error) {
	path := PartPath(prefix, dataset, node)
	b, err := readSmallFile(path)
	if err != nil {
		return nil, pathErr("read part", path, err)
	}
	p, err := decodePart(b)
	if err == nil && (p.head.Dataset != dataset || p.head.Node != node) {
		err = fmt.Errorf("%w: part of dataset %q node %d in the place of %q node %d",
			ErrBadMetadata, p.head.Dataset, p.head.Node, dataset, node)
	}
	if err != nil {
		return nil, fmt.Errorf("read part %s: %w", path, err)
	}
	return p.Entries, nil
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

// MergeManifest reads the parts of nodes 0..nodes-1 of dataset, checks that
// no path is claimed by two nodes (ErrConflict; directories may be shared)
// and writes the merged manifest durably and atomically. A missing part is
// an error wrapping fs.ErrNotExist: the merge runs only once every node
// reported its part durable. The caller owns the result.
func MergeManifest(prefix, dataset string, nodes int) (*Manifest, error) {
	path := ManifestPath(prefix, dataset)
	if err := layout.CheckDatasetName(dataset); err != nil {
		return nil, fmt.Errorf("merge manifest %s: %w", path, err)
	}
	if nodes < 1 {
		return nil, fmt.Errorf("merge manifest %s: %d nodes, need at least 1", path, nodes)
	}
	m := &Manifest{Version: FormatVersion, Dataset: dataset, Nodes: nodes, Created: time.Now().UTC()}
	owner := map[string]*Entry{}
	for node := 0; node < nodes; node++ {
		es, err := ReadPart(prefix, dataset, node)
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
	b, err := encodeDoc(manifestHead{Version: m.Version, Dataset: dataset, Nodes: nodes,
		Created: m.Created, Files: m.Files, Bytes: m.Bytes}, m.Entries)
	if err != nil {
		return nil, fmt.Errorf("merge manifest %s: %w", path, err)
	}
	if err := removeStaleTmp(path); err != nil {
		return nil, fmt.Errorf("merge manifest of %s: %w", dataset, err)
	}
	if err := writeFileAtomic(path, b, 0o644); err != nil {
		return nil, fmt.Errorf("merge manifest of %s: %w", dataset, err)
	}
	return m, nil
}

// ReadManifest returns dataset's merged manifest. A missing one wraps
// fs.ErrNotExist, a corrupt one ErrBadMetadata. It does not consult the
// index: a manifest exists before the index calls its dataset complete.
func ReadManifest(prefix, dataset string) (*Manifest, error) {
	path := ManifestPath(prefix, dataset)
	b, err := readSmallFile(path)
	if err != nil {
		return nil, pathErr("read manifest", path, err)
	}
	m, err := decodeManifest(b)
	if err == nil && m.Dataset != dataset {
		err = fmt.Errorf("%w: manifest of %q in the place of %q", ErrBadMetadata, m.Dataset, dataset)
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	return m, nil
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
		Files: w.Files, Bytes: w.Bytes, Entries: w.Entries}, nil
}
