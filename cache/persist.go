package cache

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/layout"
)

// stateVersion is the version of state.json this code writes and reads.
const stateVersion = 1

// stateFile is what the control directory holds about the cache. It is small
// (a few datasets) and rewritten whole, atomically, on every state change.
type stateFile struct {
	Version  int    `json:"version"`
	NodeID   string `json:"node_id,omitempty"`
	NextID   uint64 `json:"next_id"`
	Datasets []Info `json:"datasets"`
	Failed   []Info `json:"failed,omitempty"`
	// Kept are failed datasets whose files are kept (kept.go).
	Kept      []Info      `json:"kept,omitempty"`
	Namespace []nsDirInfo `json:"namespace,omitempty"`
}

type nsDirInfo struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
}

// stateName is the state file's name in the control directory.
const stateName = "state.json"

// persistLocked writes state.json: temporary file, fsync, rename, fsync of
// the directory, so a crash leaves either the old or the new state, whole.
// The outcome enters or leaves the read-only condition (readonly.go); a
// caller whose change a restart could not reconstruct undoes it on an
// error. s.mu must be held.
func (s *Store) persistLocked() error {
	st := stateFile{Version: stateVersion, NodeID: s.nodeID, NextID: s.nextID, Failed: s.failed}
	for _, d := range s.sortedLocked() {
		st.Datasets = append(st.Datasets, d.Info())
	}
	for _, d := range s.keptLocked() {
		st.Kept = append(st.Kept, d.Info())
	}
	for p, mode := range s.ns {
		st.Namespace = append(st.Namespace, nsDirInfo{Path: p, Mode: mode})
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cache state: %w", err)
	}
	err = s.control.WriteFileAtomic(stateName, data, 0o600)
	s.noteWriteLocked(err)
	if err != nil {
		return fmt.Errorf("persist cache state: %w", err)
	}
	return nil
}

// openDirs creates or verifies the cache and control directories and claims
// the control directory.
func (s *Store) openDirs() error {
	var err error
	if s.cache, err = s.opts.CacheDir.Create(); err != nil {
		return fmt.Errorf("cache directory: %w", err)
	}
	if s.control, err = s.opts.ControlDir.Create(); err != nil {
		s.cache.Close()
		return fmt.Errorf("control directory: %w", err)
	}
	s.control.OnWriteError(s.controlWriteFailed)
	if s.lock, err = lockControlDir(s.control); err != nil {
		s.cache.Close()
		s.control.Close()
		return err
	}
	return nil
}

// closeDirs releases the lock and the directories.
func (s *Store) closeDirs() error {
	err := s.lock.Close()
	s.cache.Close()
	s.control.Close()
	return err
}

// LockedError is ErrLocked with the lock's holder.
type LockedError struct {
	Dir string
	Pid int // 0: unknown (its control directory was full when it started)
}

func (e *LockedError) Error() string {
	holder := "unknown: its control directory was full when it started"
	if e.Pid > 0 {
		holder = strconv.Itoa(e.Pid)
	}
	return fmt.Sprintf("%v: %s (held by pid %s)", ErrLocked, e.Dir, holder)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// lockControlDir takes an exclusive flock on <control>/lock so that two
// daemons never share one cache; the holder's pid is written for the error
// message of the second. The file is never reached through a link, and it
// is truncated only once known to be our own plain file.
func lockControlDir(dir *jobdir.Dir) (*os.File, error) {
	f, err := dir.OpenFile("lock", os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, syscall.EROFS) {
		// A control file system remounted read-only: the lock a killed
		// daemon left is still there to take (flock needs no write).
		f, err = dir.OpenFile("lock", os.O_RDONLY, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("cache: lock: %w", err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("cache: lock: %w", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink != 1 || int(st.Uid) != os.Geteuid() {
		f.Close()
		return nil, &jobdir.UnsafeError{Path: dir.Join("lock"), Why: "it is not a plain file of your own (another name links to it, or it belongs to someone else)",
			Fix: "remove it; scrfs creates a fresh one"}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid := make([]byte, 32)
		n, _ := f.ReadAt(pid, 0)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			le := &LockedError{Dir: dir.Path()}
			le.Pid, _ = strconv.Atoi(strings.TrimSpace(string(pid[:n])))
			return nil, le
		}
		return nil, fmt.Errorf("cache: lock %s: %w", dir.Join("lock"), err)
	}
	// The pid overwrites the old one in place before the rest is cut, so
	// that a full file system (which has no block for a new one) still
	// gets it; if even that fails, an empty file says "unknown" rather
	// than naming a dead daemon (a read-only one keeps the old pid).
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if _, err := f.WriteAt(pid, 0); err != nil {
		pid = nil
	}
	f.Truncate(int64(len(pid)))
	return f, nil
}

// recover loads state.json and reconciles it with the cache directory. The
// reconciled state is written back if it can be; if not, the store opens
// read-only (everything recover changes, a later restart reconciles the
// same way).
func (s *Store) recover() error {
	st, err := s.readState()
	if err != nil {
		return err
	}
	s.nextID = max(st.NextID, 1)
	s.nodeID = st.NodeID
	if s.nodeID == "" {
		s.nodeID = newNodeID()
		s.log.Info("new cache: this node's identity", "node_id", s.nodeID)
	}
	s.failed = st.Failed
	for _, n := range st.Namespace {
		s.ns[n.Path] = n.Mode
	}
	for _, info := range st.Datasets {
		s.recoverDataset(info)
	}
	for _, info := range st.Kept {
		s.recoverKept(info)
	}
	// A state that was read (it names the cache's identity) is the truth
	// about which datasets are here; a missing or unreadable one is not.
	s.adoptOrphans(st.NodeID != "")
	s.persistLocked()
	return nil
}

// readState reads state.json. A missing file is a fresh cache. One that does
// not parse or breaks a rule of decodeState (which atomic writes make
// unlikely, so someone edited it) is moved aside and the cache directory
// adopted as writing: nothing is deleted and nothing is called complete that
// cannot be proven so.
func (s *Store) readState() (stateFile, error) {
	data, err := s.control.ReadFile(stateName, maxStateBytes)
	if errors.Is(err, os.ErrNotExist) {
		return stateFile{}, nil
	}
	if errors.Is(err, jobdir.ErrUnsafe) {
		return stateFile{}, fmt.Errorf("cache: read state: %w", err)
	}
	var st stateFile
	if err == nil {
		st, err = decodeState(data)
	}
	if err != nil {
		aside := stateName + ".corrupt-" + time.Now().UTC().Format("20060102T150405")
		s.control.Rename(stateName, aside)
		s.log.Error("cache state is unreadable or invalid; moved aside, cached datasets come back as writing",
			"file", s.control.Join(aside), "err", err)
		return stateFile{}, nil
	}
	return st, nil
}

func (s *Store) recoverDataset(info Info) {
	if info.State == Failed {
		return
	}
	dir := layout.DatasetDir(s.CacheDir(), info.Name)
	d := &Dataset{
		store: s, id: info.ID, name: info.Name, route: Route{Name: info.Name, Kind: info.Kind, Root: info.Root},
		state: withRecord(info.State, info.Seq), reason: info.Reason, created: info.Created, completed: info.Completed,
		seq: info.Seq, began: info.Began, flush: info.Flush.recovered(),
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
	s.log.Info("dataset recovered", "dataset", info.Name, "state", d.state.Shown(), "files", d.files, "bytes", d.bytes)
}

// recoverKept takes back a kept dataset whose directory is still there.
func (s *Store) recoverKept(info Info) {
	dir := layout.DatasetDir(s.CacheDir(), info.Name)
	usage, err := scanUsage(dir)
	if err != nil {
		s.log.Warn("the files of a failed dataset kept here are gone", "dataset", info.Name, "err", err)
		return
	}
	d := &Dataset{
		store: s, id: info.ID, name: info.Name, route: Route{Name: info.Name, Kind: info.Kind, Root: info.Root},
		state: Failed, reason: info.Reason, created: info.Created, completed: info.Completed,
		seq: info.Seq, files: usage.files, bytes: usage.bytes, kept: true, removed: true,
	}
	s.nextID = max(s.nextID, info.ID+1)
	s.kept[info.Name] = d
	s.log.Info("failed dataset kept", "dataset", info.Name, "reason", info.Reason, "files", d.files, "bytes", d.bytes)
}

// adoptOrphans takes in dataset directories the state does not know (a
// crash between mkdir and the state write of an older scrfs, or files put
// there by hand) as writing datasets. A directory that holds a record,
// though, was a recorded dataset here, and a state that was read
// (stateRead) no longer lists it: a crash cut off its removal (an eviction
// writes the state first, then moves the files to the trash) or its
// adoption (a rebuild's or fetch's files moved in, the state not yet
// written). The state is the truth: the removal is finished — the job
// rebuilds or fetches what it still needs — rather than the dataset
// reported failed as if it had been being written.
func (s *Store) adoptOrphans(stateRead bool) {
	entries, err := os.ReadDir(s.CacheDir())
	if err != nil {
		s.log.Warn("scan cache directory", "dir", s.CacheDir(), "err", err)
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || s.datasets[name] != nil || s.kept[name] != nil || layout.CheckDatasetName(name) != nil {
			continue
		}
		dir := layout.DatasetDir(s.CacheDir(), name)
		if _, err := os.Lstat(layout.DatasetRecord(dir)); err == nil && stateRead {
			// A name of its own in the trash: the time, as no dataset id
			// is assigned to it.
			if err := s.toTrash(dir, uint64(time.Now().UnixNano())); err != nil {
				s.log.Error("remove a dataset the cache state no longer lists", "dataset", name, "err", err)
				continue
			}
			s.log.Info("removed a recorded dataset the cache state no longer lists (a crash cut off its eviction or adoption)", "dataset", name)
			continue
		}
		d := s.newDatasetLocked(Route{Name: name, Kind: KindDir, Root: name})
		if usage, err := scanUsage(filepath.Join(s.CacheDir(), name)); err == nil {
			d.files, d.bytes = usage.files, usage.bytes
		}
		s.log.Warn("adopted unknown dataset directory as writing", "dataset", name)
	}
}

// newNodeID returns a fresh random identity for a new cache.
func newNodeID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
