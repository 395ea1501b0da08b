package cache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/scrfs/scrfs/layout"
)

// maxStateBytes bounds state.json: a few datasets take a few KiB; anything
// near this size was not written by scrfs.
const maxStateBytes = 16 << 20

// maxMountPath is the longest mount-relative path accepted from the state
// file (the kernel's PATH_MAX).
const maxMountPath = 4096

// decodeState parses state.json and checks it like untrusted input: the
// control directory is the daemon's own, but a file in it may have been
// edited or planted, and its names become cache paths the daemon creates,
// renames and deletes. Every dataset name must be a valid dataset name
// (layout.CheckDatasetName: one path component, not "..", not .scrfs), every
// anchor and namespace path a clean relative path inside the mount, states
// and kinds known, ids and names unique. Any violation rejects the whole
// file: the caller then adopts the cache directory as writing, which loses
// no data.
func decodeState(data []byte) (stateFile, error) {
	var st stateFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return stateFile{}, err
	}
	if dec.More() {
		return stateFile{}, fmt.Errorf("data after the state object")
	}
	if st.Version != stateVersion {
		return stateFile{}, fmt.Errorf("version %d, this scrfs reads version %d", st.Version, stateVersion)
	}
	if err := checkNodeID(st.NodeID); err != nil {
		return stateFile{}, err
	}
	names := make(map[string]bool, len(st.Datasets))
	ids := make(map[uint64]bool, len(st.Datasets))
	for i, info := range st.Datasets {
		if err := checkInfo(info, true); err != nil {
			return stateFile{}, fmt.Errorf("datasets[%d]: %w", i, err)
		}
		if names[info.Name] || ids[info.ID] {
			return stateFile{}, fmt.Errorf("datasets[%d]: dataset %q or id %d appears twice", i, info.Name, info.ID)
		}
		names[info.Name], ids[info.ID] = true, true
	}
	for i, info := range st.Failed {
		if err := checkInfo(info, false); err != nil {
			return stateFile{}, fmt.Errorf("failed[%d]: %w", i, err)
		}
		if info.State != Failed {
			return stateFile{}, fmt.Errorf("failed[%d]: dataset %q listed as failed in state %q", i, info.Name, info.State)
		}
	}
	for i, info := range st.Kept {
		if err := checkInfo(info, true); err != nil {
			return stateFile{}, fmt.Errorf("kept[%d]: %w", i, err)
		}
		if info.State != Failed || names[info.Name] || ids[info.ID] {
			return stateFile{}, fmt.Errorf("kept[%d]: dataset %q in state %q, or its name or id %d appears twice", i, info.Name, info.State, info.ID)
		}
		names[info.Name], ids[info.ID] = true, true
	}
	if n := len(st.Failed); n > maxFailures {
		st.Failed = st.Failed[n-maxFailures:]
	}
	seen := make(map[string]bool, len(st.Namespace))
	for i, ns := range st.Namespace {
		if err := checkMountPath(ns.Path); err != nil || ns.Path == "" {
			return stateFile{}, fmt.Errorf("namespace[%d]: path %q is not a directory inside the mount", i, ns.Path)
		}
		if seen[ns.Path] {
			return stateFile{}, fmt.Errorf("namespace[%d]: %q appears twice", i, ns.Path)
		}
		seen[ns.Path] = true
		st.Namespace[i].Mode &= 0o7777 // permission bits are all a mode here means
	}
	return st, nil
}

// checkInfo checks one dataset entry of the state file. A dataset held
// here has an id; a failed one may have none (0): it failed elsewhere in
// the job, or was refused here, and never had files on this node.
func checkInfo(info Info, held bool) error {
	if err := layout.CheckDatasetName(info.Name); err != nil {
		return err
	}
	if !info.State.valid() {
		return fmt.Errorf("dataset %q has unknown state %q", info.Name, info.State)
	}
	if info.ID == 0 && held {
		return fmt.Errorf("dataset %q has id 0 (ids start at 1)", info.Name)
	}
	if len(info.Began) > 64 {
		return fmt.Errorf("dataset %q: began %.20q... is too long", info.Name, info.Began)
	}
	if info.Files < 0 || info.Bytes < 0 {
		return fmt.Errorf("dataset %q has negative usage", info.Name)
	}
	if !info.Flush.State.valid() {
		return fmt.Errorf("dataset %q has unknown flush state %q", info.Name, info.Flush.State)
	}
	if err := checkMountPath(info.Root); err != nil {
		return fmt.Errorf("dataset %q: root %w", info.Name, err)
	}
	switch info.Kind {
	case "": // written before kinds existed: a directory dataset
	case KindDir:
		if path.Base(info.Root) != info.Name {
			return fmt.Errorf("dataset %q is a directory dataset anchored at %q, which is not its name", info.Name, info.Root)
		}
	case KindFlat:
	default:
		return fmt.Errorf("dataset %q has unknown kind %q", info.Name, info.Kind)
	}
	return nil
}

// checkNodeID accepts "" (a state written before identities) or 32 hex
// digits.
func checkNodeID(id string) error {
	if id == "" {
		return nil
	}
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return fmt.Errorf("node_id %.40q is not 32 hex digits", id)
	}
	return nil
}

// checkMountPath accepts a clean mount-relative path ("" is the mount root).
func checkMountPath(p string) error {
	switch {
	case p == "":
		return nil
	case len(p) > maxMountPath:
		return fmt.Errorf("%.40q... is longer than %d bytes", p, maxMountPath)
	case strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "\x00"):
		return fmt.Errorf("%q is not a clean path inside the mount", p)
	}
	return nil
}

// valid reports whether f is a known flush state (or none).
func (f FlushState) valid() bool {
	switch f {
	case "", FlushScheduled, FlushRunning, FlushDone, FlushFailed:
		return true
	}
	return false
}
