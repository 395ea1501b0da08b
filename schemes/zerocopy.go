package schemes

import (
	"context"
	"os"
	"strings"
	"sync"
)

// The zero-copy data path. Much of what a member receives it stores
// without computing on it: PARTNER copies, XOR's finished parity, RS's
// finished checksums, everything a rebuild's lost member receives. So the
// sender puts each such piece's CRC32C in the frame (a PARTNER copy's comes
// with the read, for its files' CRCs; a finished sum's is taken as the sum
// is made, while its bytes are in cache), sends it with the frame head from
// its buffer in one writev, and the receiver's link moves the payload from
// the socket into the file inside the kernel (splice), recording the
// sender's CRC as the block's. That saves the receiver a copy into user
// space and a CRC pass. Everything falls back to buffers when the option is off
// (WithZeroCopy, SCRFS_ZEROCOPY) or the kernel refuses, with byte-identical
// files; Result.Path says which path ran.
//
// Reading checkpoint files through mappings instead of pread was measured
// and is not used: on the paravirtualised 2-core VM the project is measured
// on, mapping the pages cost more than copying them into an aligned buffer
// (CRC32C of 256 MiB of tmpfs: 68-84 ms mapped, 51 ms with pread; an XOR
// step over it: 112-123 ms mapped, 83-123 ms with pread). What did pay was
// aligning the buffers pread copies into (Buffers); bench/README.md's
// redbench notes have the profiles.

// Data path names, as Result.Path and ActivePath report them.
const (
	// PathZeroCopy: PARTNER copies spliced from the socket into the
	// redundancy file, frames sent without joining head and payload.
	PathZeroCopy = "zerocopy"
	// PathCopy: every byte through pread/pwrite and buffers.
	PathCopy = "copy"
)

// ZeroCopyEnv is the environment variable that turns the zero-copy path
// off for every operation of the process when set to 0, off, false or no
// (for diagnosis, or a kernel that misbehaves); WithZeroCopy overrides it.
const ZeroCopyEnv = "SCRFS_ZEROCOPY"

// zeroCopyDefault is the process-wide default, read once from ZeroCopyEnv.
var zeroCopyDefault = sync.OnceValue(func() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(ZeroCopyEnv))) {
	case "0", "off", "false", "no":
		return false
	}
	return true
})

// WithZeroCopy turns the zero-copy data path on or off for this call
// (default: on, unless SCRFS_ZEROCOPY says off). Off, every byte goes
// through buffers; the files written are identical either way.
func WithZeroCopy(on bool) Option {
	return func(o *options) { o.zeroCopy = &on }
}

// ActivePath returns the data path operations run with opts would start
// on: PathZeroCopy, or PathCopy when it is turned off. An operation that
// finds a kernel facility refused falls back and reports PathCopy in its
// Result.
func ActivePath(opts ...Option) string {
	o := &options{}
	for _, fn := range opts {
		fn(o)
	}
	if o.zeroCopyOn() {
		return PathZeroCopy
	}
	return PathCopy
}

func (o *options) zeroCopyOn() bool {
	if o.zeroCopy != nil {
		return *o.zeroCopy
	}
	return zeroCopyDefault()
}

// PartsSender is an optional Conn extension: SendParts sends the
// concatenation of parts (at most three) as one message, without copying
// them into one buffer first. It must not keep the parts after returning.
type PartsSender interface {
	SendParts(ctx context.Context, parts ...[]byte) error
}

// FileReceiver is an optional Conn extension: RecvToFile receives the next
// message; if it is exactly len(head)+n bytes long, its first len(head)
// bytes land in head, the other n in f at off (without passing through
// user space where the kernel allows), and it returns head; any other
// message is returned whole and f is untouched.
type FileReceiver interface {
	RecvToFile(ctx context.Context, head []byte, f *os.File, off int64, n int) ([]byte, error)
}

// PartsReceiver is an optional Conn extension: RecvParts receives the
// next message into buf when it is exactly n bytes long (n <= cap(buf)),
// calling fn(lo, hi) each time its bytes [lo, hi) have landed — the first
// from bytes, then part bytes at a time, in order — so the caller can work
// on each part while it is in cache. Any other message is returned whole,
// as Recv returns it, without calling fn; an error from fn fails the
// receive.
type PartsReceiver interface {
	RecvParts(ctx context.Context, buf []byte, n, from, part int, fn func(lo, hi int) error) ([]byte, error)
}

// fileIOReporter is implemented by transports that can fall back from
// kernel transfers to copies (peer.Stream), so Result.Path tells the truth.
type fileIOReporter interface {
	FileIO() string
}
