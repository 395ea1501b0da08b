package schemes

import (
	"log/slog"
	"time"
)

// Option tunes one Encode or Rebuild call. Options are local to the member;
// anything the members must agree on lives in Params.
type Option func(*options)

type options struct {
	piece    int
	progress func(done, total int64)
	log      *slog.Logger
	bufs     *Buffers
	spare    func() string
	zeroCopy *bool // nil: the process default (SCRFS_ZEROCOPY)
}

// WithPieceSize overrides Params.PieceSize for this call. Every member must
// use the same value (they check); n <= 0 is ignored.
func WithPieceSize(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.piece = n
		}
	}
}

// WithProgress registers fn to be called as data moves, with the bytes of
// this member's work done so far (data read from its files or redundancy
// file, and data written) and the total it expects; done reaches total when
// the data phase ends. Calls are serialised and done never decreases; fn
// runs on the operation's goroutines and must return quickly.
func WithProgress(fn func(done, total int64)) Option {
	return func(o *options) { o.progress = fn }
}

// WithLogger sets the logger for debug and warning messages (default:
// discard). The logger is used, not owned.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithBuffers makes the call take its piece buffers from bufs and return
// them there (see Buffers). Without it each call allocates its own.
func WithBuffers(bufs *Buffers) Option {
	return func(o *options) {
		if bufs != nil {
			o.bufs = bufs
		}
	}
}

// WithSpare lets the call write its redundancy file over an existing file
// instead of a new one: take returns the path of a file the call may rename
// into place and overwrite (a spare, such as an evicted dataset's
// redundancy file), or "" for none. Overwriting pages a file already holds
// is much cheaper than allocating new ones on tmpfs. Every byte of the
// result is written and the file is cut to its size, so nothing of the
// spare's old content survives.
func WithSpare(take func() string) Option {
	return func(o *options) { o.spare = take }
}

func buildOptions(p *Params, opts []Option) *options {
	o := &options{log: slog.New(slog.DiscardHandler)}
	for _, fn := range opts {
		fn(o)
	}
	if o.bufs == nil {
		o.bufs = NewBuffers()
	}
	if o.piece > 0 {
		p.PieceSize = o.piece
	}
	return o
}

// Result reports one member's part of an operation.
type Result struct {
	// File is this member's redundancy file.
	File string
	// DataBytes is the size of this member's logical file (its regular
	// files' bytes); for a rebuilt member, the bytes restored.
	DataBytes int64
	// Sent and Received count bytes over the links, frames included.
	Sent, Received int64
	Duration       time.Duration
	// Path is the data path the call ran on: PathZeroCopy, or PathCopy when
	// it was off or the kernel refused a mapping or splice along the way.
	Path string
}

func (s *session) result(file string, data int64, start time.Time) *Result {
	return &Result{File: file, DataBytes: data, Sent: s.sent.Load(), Received: s.recvd.Load(), Duration: time.Since(start), Path: s.path()}
}
