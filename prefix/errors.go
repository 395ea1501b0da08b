package prefix

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Sentinel errors, for errors.Is. The returned errors wrap them with the
// operation and the path.
var (
	// ErrBadMetadata: an index, manifest or part file in the prefix is not
	// valid (truncated, not JSON, an unknown version, inconsistent fields).
	// scrfs never overwrites such a file on its own; an operator must look.
	ErrBadMetadata = errors.New("corrupt scrfs metadata")
	// ErrConflict: two nodes claim the same path of a dataset.
	ErrConflict = errors.New("path claimed by two nodes")
	// ErrBadEntry: an Entry handed to Fetch or WritePart is invalid (a path
	// escaping the dataset, a negative size, an unknown type).
	ErrBadEntry = errors.New("invalid manifest entry")
	// ErrNotComplete: the dataset is not marked complete in the index.
	ErrNotComplete = errors.New("dataset is not complete")
)

// CorruptError reports a file of the prefix that does not match its manifest
// entry during Fetch: missing, of the wrong type or size, truncated while
// being read, or with a different CRC32C. The caller should record a failed
// fetch in the index and fall back to an older dataset.
type CorruptError struct {
	Path   string // the file in the prefix directory
	Reason string // what did not match, e.g. "crc32c 0x1a2b3c4d, manifest says 0x5e6f7a8b"
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt %s: %s", e.Path, e.Reason)
}

// pathErr formats "op path: cause" without repeating the path an
// *fs.PathError already carries (os errors name the temporary file; the
// caller wants the file the user knows). errors.Is still sees the errno.
func pathErr(op, path string, err error) error {
	switch e := err.(type) {
	case *fs.PathError:
		err = e.Err
	case *os.LinkError:
		err = e.Err
	case *os.SyscallError:
		err = e.Err
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}

// CopyFault reports whether err says that the prefix's copy of a dataset
// is bad — a file missing, changed or truncated (CorruptError), metadata
// that does not parse or verify, an entry or a claim that cannot be —
// rather than that the prefix could not be reached or the reader could not
// write its own copy (no space, permissions, a node killed). Only a fault
// of the copy may mark the dataset in the index as a failed fetch: the
// others say nothing of it.
func CopyFault(err error) bool {
	var ce *CorruptError
	return errors.As(err, &ce) || errors.Is(err, ErrBadMetadata) || errors.Is(err, ErrUnverified) ||
		errors.Is(err, ErrBadEntry) || errors.Is(err, ErrConflict)
}

// truncated is the error of a prefix file that ends at byte at, before the
// size its manifest gives.
func truncated(path string, at, size int64) error {
	return &CorruptError{Path: path, Reason: fmt.Sprintf("truncated: ends at byte %d, manifest says %d", at, size)}
}
