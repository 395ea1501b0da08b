package schemes

import (
	"errors"
	"fmt"

	"github.com/scrfs/scrfs/redfile"
)

// Sentinel errors; test with errors.Is. Returned errors wrap them with the
// ranks, files and offsets involved.
var (
	// ErrInvalidParams: Params or Member do not describe a runnable operation.
	ErrInvalidParams = errors.New("invalid redundancy parameters")
	// ErrTooManyLost: more members are lost than the scheme can rebuild.
	// Rebuild returns it before writing any byte.
	ErrTooManyLost = errors.New("too many members lost to rebuild")
	// ErrCorrupt: a redundancy file (or a restored file) fails its checks —
	// bad magic or version, CRC mismatch, truncation, impossible lengths.
	// It is the format's own (redfile.ErrCorrupt), so errors of either
	// package match it.
	ErrCorrupt = redfile.ErrCorrupt
	// ErrMismatch: members disagree (parameters, dataset, chunk sizes), or a
	// member's files no longer match what its redundancy file records.
	ErrMismatch = errors.New("redundancy set mismatch")
	// ErrProtocol: a peer sent a message this member did not expect.
	ErrProtocol = errors.New("redundancy protocol error")
	// ErrAborted: a peer gave up on the operation; the PeerError carrying it
	// also wraps the peer's own sentinel when it had one.
	ErrAborted = errors.New("peer aborted the operation")
)

// PeerError reports a failure that concerns another member of the set: its
// link failed, it sent something unexpected, or it aborted (then Err wraps
// ErrAborted and, when known, the sentinel of the peer's own failure).
type PeerError struct {
	Rank int
	Err  error
}

// Error implements error.
func (e *PeerError) Error() string { return fmt.Sprintf("peer rank %d: %v", e.Rank, e.Err) }

// Unwrap returns the underlying error.
func (e *PeerError) Unwrap() error { return e.Err }

// errCodes maps sentinels to the codes abort messages carry, so a member can
// tell its peers "corrupt" or "too many lost" across the wire and errors.Is
// still works on their side.
var errCodes = []struct {
	code string
	err  error
}{
	{"too_many_lost", ErrTooManyLost},
	{"corrupt", ErrCorrupt},
	{"mismatch", ErrMismatch},
	{"protocol", ErrProtocol},
	{"invalid", ErrInvalidParams},
}

func codeOf(err error) string {
	for _, c := range errCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

func errOfCode(code string) error {
	for _, c := range errCodes {
		if c.code == code {
			return c.err
		}
	}
	return nil
}
