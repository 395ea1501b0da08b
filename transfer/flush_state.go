package transfer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/scrfs/scrfs/cache"
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

func flushStatePath(controlDir string) string { return filepath.Join(controlDir, "flush.json") }

// loadFlushState reads the state; a missing file is a fresh start, and an
// unreadable one is reported and replaced (losing a counter is harmless).
func loadFlushState(controlDir string) (flushState, error) {
	b, err := os.ReadFile(flushStatePath(controlDir))
	if errors.Is(err, fs.ErrNotExist) {
		return flushState{Version: flushStateVersion}, nil
	}
	var st flushState
	if err == nil {
		st, err = decodeFlushState(b)
	}
	if err != nil {
		return flushState{Version: flushStateVersion}, fmt.Errorf("read %s: %w", flushStatePath(controlDir), err)
	}
	return st, nil
}

// decodeFlushState parses flush.json and bounds its lists, so a file edited
// by hand cannot grow them without limit.
func decodeFlushState(b []byte) (flushState, error) {
	var st flushState
	if err := json.Unmarshal(b, &st); err != nil {
		return flushState{}, err
	}
	if st.Version != flushStateVersion {
		return flushState{}, fmt.Errorf("version %d, this scrfs reads version %d", st.Version, flushStateVersion)
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
func (st *flushState) save(controlDir string) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return cache.WriteFileAtomic(flushStatePath(controlDir), append(b, '\n'), 0o600)
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
