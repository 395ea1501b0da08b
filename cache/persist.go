package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stateVersion is the version of state.json this code writes and reads.
const stateVersion = 1

// stateFile is what the control directory holds about the cache. It is small
// (a few datasets) and rewritten whole, atomically, on every state change.
type stateFile struct {
	Version   int         `json:"version"`
	NextID    uint64      `json:"next_id"`
	Datasets  []Info      `json:"datasets"`
	Failed    []Info      `json:"failed,omitempty"`
	Namespace []nsDirInfo `json:"namespace,omitempty"`
}

type nsDirInfo struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
}

func (s *Store) statePath() string { return filepath.Join(s.opts.ControlDir, "state.json") }

// persistLocked writes state.json: temporary file, fsync, rename, fsync of
// the directory, so a crash leaves either the old or the new state, whole.
// s.mu must be held.
func (s *Store) persistLocked() error {
	st := stateFile{Version: stateVersion, NextID: s.nextID, Failed: s.failed}
	for _, d := range s.sortedLocked() {
		st.Datasets = append(st.Datasets, d.Info())
	}
	for p, mode := range s.ns {
		st.Namespace = append(st.Namespace, nsDirInfo{Path: p, Mode: mode})
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cache state: %w", err)
	}
	if err := WriteFileAtomic(s.statePath(), data, 0o600); err != nil {
		return fmt.Errorf("persist cache state: %w", err)
	}
	return nil
}

// WriteFileAtomic replaces path with data so that a crash at any moment
// leaves either the old content or the new, never a mix: it writes a
// temporary file in the same directory, fsyncs it, renames it over path and
// fsyncs the directory.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// lockControlDir takes an exclusive flock on <control>/lock so that two
// daemons never share one cache; the holder's pid is written for the error
// message of the second.
func lockControlDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (held by pid %s)", ErrLocked, dir, strings.TrimSpace(string(pid)))
		}
		return nil, fmt.Errorf("cache: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// recover loads state.json and reconciles it with the cache directory.
func (s *Store) recover() error {
	st, err := s.readState()
	if err != nil {
		return err
	}
	s.nextID = max(st.NextID, 1)
	s.failed = st.Failed
	for _, n := range st.Namespace {
		s.ns[n.Path] = n.Mode
	}
	for _, info := range st.Datasets {
		s.recoverDataset(info)
	}
	s.adoptOrphans()
	return s.persistLocked()
}

// readState reads state.json. A missing file is a fresh cache. A corrupt one
// (which atomic writes make unlikely) is moved aside and the cache directory
// adopted as writing: nothing is deleted and nothing is called complete that
// cannot be proven so.
func (s *Store) readState() (stateFile, error) {
	var st stateFile
	data, err := os.ReadFile(s.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("cache: read state: %w", err)
	}
	err = json.Unmarshal(data, &st)
	if err == nil && st.Version != stateVersion {
		err = fmt.Errorf("version %d, this scrfs reads version %d", st.Version, stateVersion)
	}
	if err == nil {
		for _, info := range st.Datasets {
			if !info.State.valid() {
				err = fmt.Errorf("dataset %q has unknown state %q", info.Name, info.State)
				break
			}
		}
	}
	if err != nil {
		aside := s.statePath() + ".corrupt-" + time.Now().UTC().Format("20060102T150405")
		os.Rename(s.statePath(), aside)
		s.log.Error("cache state is unreadable; moved aside, cached datasets come back as writing",
			"file", aside, "err", err)
		return stateFile{}, nil
	}
	return st, nil
}

func (s *Store) recoverDataset(info Info) {
	if info.State == Failed {
		return
	}
	dir := filepath.Join(s.opts.CacheDir, info.Name)
	d := &Dataset{
		store: s, id: info.ID, name: info.Name, route: Route{Name: info.Name, Kind: info.Kind, Root: info.Root},
		state: info.State, reason: info.Reason, created: info.Created, completed: info.Completed,
		flush: info.Flush.recovered(),
	}
	if d.route.Kind == "" {
		d.route.Kind, d.route.Root = KindDir, info.Name
	}
	s.nextID = max(s.nextID, info.ID+1)
	usage, err := scanUsage(dir)
	switch {
	case errors.Is(err, os.ErrNotExist) && info.State == Writing:
		// Created in state before the crash but not yet on disk.
		os.Mkdir(dir, 0o700)
	case errors.Is(err, os.ErrNotExist):
		d.state, d.reason = Failed, "cache directory missing after restart"
		s.failed = append(s.failed, d.infoLocked())
		s.log.Warn("completed dataset lost from cache", "dataset", info.Name, "dir", dir)
		return
	case err != nil:
		s.log.Warn("count dataset files", "dataset", info.Name, "err", err)
	default:
		d.files, d.bytes = usage.files, usage.bytes
	}
	s.datasets[info.Name] = d
	s.log.Info("dataset recovered", "dataset", info.Name, "state", d.state, "files", d.files, "bytes", d.bytes)
}

// adoptOrphans takes in dataset directories the state does not know (a
// crash between mkdir and the state write of an older scrfs, or files put
// there by hand) as writing datasets.
func (s *Store) adoptOrphans() {
	entries, err := os.ReadDir(s.opts.CacheDir)
	if err != nil {
		s.log.Warn("scan cache directory", "dir", s.opts.CacheDir, "err", err)
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || s.datasets[name] != nil || name == metaDirName {
			continue
		}
		d := s.newDatasetLocked(Route{Name: name, Kind: KindDir, Root: name})
		if usage, err := scanUsage(filepath.Join(s.opts.CacheDir, name)); err == nil {
			d.files, d.bytes = usage.files, usage.bytes
		}
		s.log.Warn("adopted unknown dataset directory as writing", "dataset", name)
	}
}
