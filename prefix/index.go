package prefix

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/scrfs/scrfs/layout"
)

// Dataset states in the index.
const (
	// StateFlushing: a flush was started; files and parts may be partial.
	// Never fetched.
	StateFlushing = "flushing"
	// StateComplete: every node's files and part are durable and the merged
	// manifest is written.
	StateComplete = "complete"
)

// FetchFailure records one failed attempt to fetch a dataset.
type FetchFailure struct {
	Time   time.Time `json:"time"`
	Node   int       `json:"node"`   // the node that failed
	Reason string    `json:"reason"` // the error, e.g. a CorruptError's text
}

// IndexEntry is one dataset in the job index. A plain value.
type IndexEntry struct {
	Name  string `json:"name"`
	ID    uint64 `json:"id"`    // creation order (the cache's dataset ID): larger is newer
	State string `json:"state"` // StateFlushing or StateComplete
	Nodes int    `json:"nodes"` // nodes that flushed a part
	Files int64  `json:"files"`
	Bytes int64  `json:"bytes"`
	// Kind and Root record where the dataset sat in the mount ("dir" with
	// its directory, or "flat" with the shared directory holding its files;
	// mount-relative, "" is the mount root), so a fetch puts it back where
	// the application looks. Both optional: "" means a directory of the
	// dataset's name at the top of the mount.
	Kind string `json:"kind,omitempty"`
	Root string `json:"root,omitempty"`
	// Started is when the last flush began; Flushed when it completed.
	Started time.Time `json:"started,omitzero"`
	Flushed time.Time `json:"flushed,omitzero"`
	// FailedFetches lists failed fetch attempts, oldest first (at most
	// maxFailures). Newest skips a dataset with any.
	FailedFetches []FetchFailure `json:"failed_fetches,omitempty"`
	// Manifest is the SHA-256 (hex) of the merged manifest the flush that
	// completed the dataset wrote: a fetch reads that manifest and no
	// other. Set by CompleteFlush.
	Manifest string `json:"manifest,omitempty"`
	// MAC signs every other field (index.go's entryMAC), so nobody without
	// the user's prefix key can add, change or complete an entry.
	MAC string `json:"mac,omitempty"`
	// Trust is what ReadIndex found of MAC. Newest offers only entries the
	// prefix trusts.
	Trust Trust `json:"-"`
}

// Index is the job index, <prefix>/.scrfs/index.json. Change it only inside
// UpdateIndex; the caller owns what ReadIndex returns.
type Index struct {
	Version int `json:"version"`
	// Current names the dataset a restart should fetch even if newer ones
	// exist (scr_index --current); "" = the newest. Newest falls back to
	// older datasets, never newer ones, when it is unusable.
	Current string `json:"current,omitempty"`
	// CurrentMAC signs Current.
	CurrentMAC string `json:"current_mac,omitempty"`
	// Datasets are sorted oldest first (by ID, then Flushed, then Name).
	Datasets []IndexEntry `json:"datasets"`

	// trustUnsigned: Newest offers Unsigned entries too (Config.TrustUnsigned).
	trustUnsigned bool
}

const (
	maxFailures  = 16   // failures kept per dataset: one is enough to skip it
	maxReasonLen = 1024 // bytes of a failure reason kept
)

func emptyIndex() *Index { return &Index{Version: FormatVersion, Datasets: []IndexEntry{}} }

// older orders entries by ID, then Flushed, then Name.
func older(a, b *IndexEntry) bool {
	switch {
	case a.ID != b.ID:
		return a.ID < b.ID
	case !a.Flushed.Equal(b.Flushed):
		return a.Flushed.Before(b.Flushed)
	}
	return a.Name < b.Name
}

func (ix *Index) sort() {
	sort.SliceStable(ix.Datasets, func(i, j int) bool { return older(&ix.Datasets[i], &ix.Datasets[j]) })
}

func (ix *Index) find(name string) int {
	for i := range ix.Datasets {
		if ix.Datasets[i].Name == name {
			return i
		}
	}
	return -1
}

// Lookup returns the entry of dataset name.
func (ix *Index) Lookup(name string) (IndexEntry, bool) {
	if i := ix.find(name); i >= 0 {
		return ix.Datasets[i], true
	}
	return IndexEntry{}, false
}

// Put adds e or replaces the entry of the same name, after validating it:
// an entry of this user's, which the update signs (so it counts as
// Verified from now on).
func (ix *Index) Put(e IndexEntry) error {
	if err := e.check(); err != nil {
		return err
	}
	e.Trust = Verified
	if i := ix.find(e.Name); i >= 0 {
		ix.Datasets[i] = e
	} else {
		ix.Datasets = append(ix.Datasets, e)
	}
	ix.sort()
	return nil
}

// Remove drops dataset name (and clears Current if it named it). It
// reports whether the dataset was there.
func (ix *Index) Remove(name string) bool {
	i := ix.find(name)
	if i < 0 {
		return false
	}
	ix.Datasets = append(ix.Datasets[:i], ix.Datasets[i+1:]...)
	if ix.Current == name {
		ix.Current = ""
	}
	return true
}

// SetCurrent marks dataset name as the one to restart from; "" clears the
// mark. The dataset must be in the index and complete. The user's choice
// clears its failed fetches too: Newest skips a dataset with any, and a
// user who marks it means it to be fetched (they repaired it, or the
// failure was not its fault).
func (ix *Index) SetCurrent(name string) error {
	if name == "" {
		ix.Current = ""
		return nil
	}
	e, ok := ix.Lookup(name)
	if !ok {
		return fmt.Errorf("set current: no dataset %q in the index", name)
	}
	if e.State != StateComplete {
		return fmt.Errorf("set current %s: %w (state %s)", name, ErrNotComplete, e.State)
	}
	if !ix.usable(&e) {
		return fmt.Errorf("set current %s: %w: its index entry's MAC is %s", name, ErrUnverified, e.Trust)
	}
	ix.Current = name
	ix.Datasets[ix.find(name)].FailedFetches = nil
	return nil
}

// AddFetchFailure records a failed fetch of dataset name, so Newest skips it
// from now on. Long reasons are cut; only the last maxFailures are kept.
func (ix *Index) AddFetchFailure(name string, f FetchFailure) error {
	i := ix.find(name)
	if i < 0 {
		return fmt.Errorf("record fetch failure: no dataset %q in the index", name)
	}
	if len(f.Reason) > maxReasonLen {
		f.Reason = f.Reason[:maxReasonLen]
	}

	if f.Node < 0 {
		return fmt.Errorf("record fetch failure of %s: negative node %d", name, f.Node)
	}
	e := &ix.Datasets[i]
	if !ix.usable(e) {
		// Changing it would sign what someone else wrote.
		return fmt.Errorf("record fetch failure of %s: %w: its index entry's MAC is %s", name, ErrUnverified, e.Trust)
	}
	e.FailedFetches = append(e.FailedFetches, f)
	if n := len(e.FailedFetches); n > maxFailures {
		e.FailedFetches = append([]FetchFailure(nil), e.FailedFetches[n-maxFailures:]...)
	}
	return nil
}

// MaxID returns the largest dataset ID in the index (0 if empty), so a new
// run can number its datasets after those of earlier runs.
func (ix *Index) MaxID() uint64 {
	var m uint64
	for i := range ix.Datasets {
		m = max(m, ix.Datasets[i].ID)
	}
	return m
}

// Trusted reports whether e's MAC lets a fetch use it: it verifies, or e
// is unsigned and the prefix trusts unsigned entries.
func (ix *Index) Trusted(e IndexEntry) bool { return ix.usable(&e) }

// usable is Trusted.
func (ix *Index) usable(e *IndexEntry) bool {
	return e.Trust == Verified || e.Trust == Unsigned && ix.trustUnsigned
}

// Newest picks the dataset to fetch, as SCR does: among complete datasets
// without a failed fetch whose entry the prefix trusts (its MAC) and for
// which usable (nil = all) returns true, the newest — but no newer than
// Current when Current is set, so a user's choice of restart point holds
// and falls back only to older datasets.
func (ix *Index) Newest(usable func(IndexEntry) bool) (IndexEntry, bool) {
	var limit *IndexEntry
	if i := ix.find(ix.Current); ix.Current != "" && i >= 0 {
		limit = &ix.Datasets[i]
	}
	best := -1
	for i := range ix.Datasets {
		e := &ix.Datasets[i]
		if e.State != StateComplete || len(e.FailedFetches) > 0 || !ix.usable(e) {
			continue
		}
		if limit != nil && older(limit, e) {
			continue
		}
		if best >= 0 && !older(&ix.Datasets[best], e) {
			continue
		}
		if usable != nil && !usable(*e) {
			continue
		}
		best = i
	}
	if best < 0 {
		return IndexEntry{}, false
	}
	return ix.Datasets[best], true
}

func (e *IndexEntry) check() error {
	if err := layout.CheckDatasetName(e.Name); err != nil {
		return err
	}
	switch {
	case e.State != StateFlushing && e.State != StateComplete:
		return fmt.Errorf("dataset %s: unknown state %q", e.Name, e.State)
	case e.Nodes < 0 || e.Files < 0 || e.Bytes < 0:
		return fmt.Errorf("dataset %s: negative nodes, files or bytes", e.Name)
	case e.State == StateComplete && e.Nodes < 1:
		return fmt.Errorf("dataset %s: complete with %d nodes", e.Name, e.Nodes)
	}
	if err := layout.CheckRoute(e.Name, e.Kind, e.Root); err != nil {
		return fmt.Errorf("dataset %s: %v", e.Name, err)
	}
	if !isDigest(e.Manifest) || !isDigest(e.MAC) {
		return fmt.Errorf("dataset %s: manifest or mac is not 64 hex digits", e.Name)
	}
	for _, f := range e.FailedFetches {
		if f.Node < 0 {
			return fmt.Errorf("dataset %s: fetch failure of negative node %d", e.Name, f.Node)
		}
	}
	return nil
}

// validate checks the index as a whole.
func (ix *Index) validate() error {
	seen := make(map[string]bool, len(ix.Datasets))
	for i := range ix.Datasets {
		e := &ix.Datasets[i]
		if err := e.check(); err != nil {
			return err
		}
		if seen[e.Name] {
			return fmt.Errorf("dataset %s listed twice", e.Name)
		}
		seen[e.Name] = true
	}
	if ix.Current != "" && !seen[ix.Current] {
		return fmt.Errorf("current dataset %q is not in the index", ix.Current)
	}
	if !isDigest(ix.CurrentMAC) {
		return fmt.Errorf("current_mac is not 64 hex digits")
	}
	return nil
}

// isDigest accepts "" or 64 lowercase hex digits: a SHA-256 or a MAC.
func isDigest(s string) bool {
	if s == "" {
		return true
	}
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeIndex parses and validates an index file's bytes.
func decodeIndex(b []byte) (*Index, error) {
	var w struct {
		Version    *int          `json:"version"`
		Current    string        `json:"current"`
		CurrentMAC string        `json:"current_mac"`
		Datasets   *[]IndexEntry `json:"datasets"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	if w.Version == nil || *w.Version != FormatVersion {
		return nil, fmt.Errorf("%w: %s, want version %d", ErrBadMetadata, versionString(w.Version), FormatVersion)
	}
	if w.Datasets == nil || *w.Datasets == nil {
		return nil, fmt.Errorf("%w: no \"datasets\" list", ErrBadMetadata)
	}
	ix := &Index{Version: *w.Version, Current: w.Current, CurrentMAC: w.CurrentMAC, Datasets: *w.Datasets}
	if err := ix.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	ix.sort()
	return ix, nil
}

func encodeIndex(ix *Index) ([]byte, error) {
	b, err := json.MarshalIndent(ix, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
