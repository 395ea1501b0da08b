package cache

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
)

// State is where a dataset is in its life. The zero value is not a state.
type State string

// The dataset states. Completed datasets (every state but Writing and Failed)
// are read-only and count against the cache size.
const (
	Writing   State = "writing"   // the application may still create and write files
	Complete  State = "complete"  // every file closed here; read-only; the job's record not yet here
	Recorded  State = "recorded"  // the job agreed its record; redundancy not yet applied (or none: SINGLE)
	Protected State = "protected" // redundancy applied across the set
	Degraded  State = "degraded"  // redundancy applied with members missing, or not at all; see Reason
	Failed    State = "failed"    // unusable; see Reason
)

// States lists every state as status and metrics show it, in lifecycle
// order (see Shown).
var States = []State{Writing, Complete, Protected, Degraded, Failed}

// Shown returns the state as status and metrics show it: a recorded
// dataset is shown complete (its job-wide sequence number says that the
// job agreed it), so the states of the command line stay the ones
// docs/cli.md promises, and a dataset of the SINGLE scheme, which is never
// protected, reads "complete" as it always has.
func (s State) Shown() State {
	if s == Recorded {
		return Complete
	}
	return s
}

// withRecord returns the state of a completed dataset in state st with
// job-wide sequence seq: one that has a sequence was recorded (a fetch
// adopts a dataset with the prefix's record, and the state files of
// earlier versions kept recorded datasets as complete).
func withRecord(st State, seq uint64) State {
	if st == Complete && seq > 0 {
		return Recorded
	}
	return st
}

// Completed reports whether s is a state of a dataset whose files are final.
func (s State) Completed() bool {
	return s == Complete || s == Recorded || s == Protected || s == Degraded
}

func (s State) valid() bool {
	return s == Recorded || slices.Contains(States, s)
}

// canMove reports whether the state machine allows from → to.
func canMove(from, to State) bool {
	switch {
	case to == Failed:
		return from != Failed
	case from == Writing:
		return to == Complete
	case from == Complete:
		return to == Recorded || to == Protected || to == Degraded
	case from == Recorded || from == Protected || from == Degraded:
		// A later re-encode (after a rebuild, say) may change the verdict.
		return to == Protected || to == Degraded
	}
	return false
}

// Sentinel errors of the store. The fs package maps them to errno values.
var (
	// ErrNoDataset: the path matches no dataset rule (EPERM at the mount).
	ErrNoDataset = errors.New("path matches no dataset")
	// ErrReadOnly: the dataset is complete and can no longer change (EROFS).
	ErrReadOnly = errors.New("dataset is complete and read-only")
	// ErrNotFound: no dataset of that name (ENOENT).
	ErrNotFound = errors.New("no such dataset")
	// ErrExists: a dataset of that name exists already (EEXIST).
	ErrExists = errors.New("dataset exists")
	// ErrNotEmpty: the dataset still has files (ENOTEMPTY).
	ErrNotEmpty = errors.New("dataset is not empty")
	// ErrClosed: the store has been closed (EIO).
	ErrClosed = errors.New("cache store is closed")
	// ErrLocked: another daemon holds the control directory.
	ErrLocked = errors.New("control directory is in use by another scrfs daemon")
	// ErrControlFull: the store is read-only because its state cannot be
	// written to the control directory (ENOSPC, whatever the cause: the
	// error's text names it). See ReadOnly.
	ErrControlFull = errors.New("the control directory is full or cannot be written; the cache is read-only until its state can be saved")
)

// errnos is what each sentinel means to an application at the mount and to
// the command line: the one table of them.
var errnos = []struct {
	err   error
	errno syscall.Errno
}{
	{ErrNoDataset, syscall.EPERM},
	{ErrReadOnly, syscall.EROFS},
	{ErrNotFound, syscall.ENOENT},
	{ErrExists, syscall.EEXIST},
	{ErrNotEmpty, syscall.ENOTEMPTY},
	{ErrClosed, syscall.EIO},
	{ErrLocked, syscall.EBUSY},
	{ErrControlFull, syscall.ENOSPC},
	{ErrPointerTooLarge, syscall.EFBIG},
	{ErrTooManyPointers, syscall.ENOSPC},
}

// Errno returns the errno that err stands for when it is (or wraps) one of
// the store's sentinel errors.
func Errno(err error) (syscall.Errno, bool) {
	for _, m := range errnos {
		if errors.Is(err, m.err) {
			return m.errno, true
		}
	}
	return 0, false
}

// TransitionError reports a state change the state machine does not allow.
type TransitionError struct {
	Dataset  string
	From, To State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("dataset %s: cannot go from %s to %s", e.Dataset, e.From, e.To)
}
