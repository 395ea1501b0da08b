package transfer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/layout"
)

// flushState is what a node remembers about flushing across restarts, in
// <control>/flush.json next to the cache's state.json. The cache persists
// each dataset's own flush status; this file holds what outlives datasets.
type flushState struct {
	Version int `json:"version"`
	// Settled counts the datasets that settled on node 0 (protected,
	// degraded, or complete under SINGLE); flush.every flushes every Nth.
	// SCR keeps its flush counter across restarts too.
	Settled uint64 `json:"settled"`
	// Counted names the datasets already counted (the newest few), so a
	// dataset protected again after a restart is not counted twice.
	Counted []string `json:"counted,omitempty"`
	// Lost names the datasets that left this node's cache (evicted,
	// dropped or failed), newest last. A node asked to flush a dataset it
	// does not hold must tell "lost its files" (an error) from "never wrote
	// any" (an empty part); only this memory tells them apart.
	Lost []lostDataset `json:"lost,omitempty"`
}

// lostDataset is one dataset that left this node's cache.
type lostDataset struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

const (
	flushStateVersion = 1
	maxCounted        = 64  // a dataset is counted within moments of settling
	maxLost           = 256 // far more than cache_size: flushes ask for recent datasets
)

// flushStateName is the file's name in the control directory; maxFlushState
// bounds its size (a few KiB at most when scrfs writes it).
const (
	flushStateName = "flush.json"
	maxFlushState  = 1 << 20
)

// loadFlushState reads the state from the control directory, never through
// a link; a missing file is a fresh start, and an unreadable or invalid one
// is reported and replaced (losing a counter is harmless).
func loadFlushState(dir *jobdir.Dir) (flushState, error) {
	b, err := dir.ReadFile(flushStateName, maxFlushState)
	if errors.Is(err, fs.ErrNotExist) {
		return flushState{Version: flushStateVersion}, nil
	}
	var st flushState
	if err == nil {
		st, err = decodeFlushState(b)
	}
	if err != nil {
		return flushState{Version: flushStateVersion}, fmt.Errorf("read %s: %w", dir.Join(flushStateName), err)
	}
	return st, nil
}

// decodeFlushState parses flush.json like untrusted input: every name must
// be a valid dataset name (layout.CheckDatasetName), and the lists are
// bounded, so a file edited or planted by hand can neither grow them without
// limit nor smuggle a path into a name.
func decodeFlushState(b []byte) (flushState, error) {
	var st flushState
	if err := json.Unmarshal(b, &st); err != nil {
		return flushState{}, err
	}
	if st.Version != flushStateVersion {
		return flushState{}, fmt.Errorf("version %d, this scrfs reads version %d", st.Version, flushStateVersion)
	}
	for _, name := range st.Counted {
		if err := layout.CheckDatasetName(name); err != nil {
			return flushState{}, fmt.Errorf("counted: %w", err)
		}
	}
	for _, l := range st.Lost {
		if err := layout.CheckDatasetName(l.Name); err != nil {
			return flushState{}, fmt.Errorf("lost: %w", err)
		}
	}
	if n := len(st.Counted); n > maxCounted {
		st.Counted = st.Counted[n-maxCounted:]
	}
	if n := len(st.Lost); n > maxLost {
		st.Lost = st.Lost[n-maxLost:]
	}
	return st, nil
}

// save writes the state atomically.
func (st *flushState) save(dir *jobdir.Dir) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return dir.WriteFileAtomic(flushStateName, append(b, '\n'), 0o600)
}

// count records that dataset name settled; it reports false if it was
// counted before.
func (st *flushState) count(name string) bool {
	if slices.Contains(st.Counted, name) {
		return false
	}
	st.Settled++
	st.Counted = append(st.Counted, name)
	if n := len(st.Counted); n > maxCounted {
		st.Counted = slices.Delete(st.Counted, 0, n-maxCounted)
	}
	return true
}

// lose records that dataset name left the cache.
func (st *flushState) lose(name, why string) {
	st.Lost = slices.DeleteFunc(st.Lost, func(l lostDataset) bool { return l.Name == name })
	st.Lost = append(st.Lost, lostDataset{Name: name, Why: why})
	if n := len(st.Lost); n > maxLost {
		st.Lost = slices.Delete(st.Lost, 0, n-maxLost)
	}
}

// lostWhy returns why dataset name left the cache, or "" if it did not.
func (st *flushState) lostWhy(name string) string {
	for i := len(st.Lost) - 1; i >= 0; i-- {
		if st.Lost[i].Name == name {
			return st.Lost[i].Why
		}
	}
	return ""
}
