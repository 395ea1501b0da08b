package prefix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/scrfs/scrfs/layout"
)

// Config says where a prefix is and how far to trust what it holds.
type Config struct {
	// Location is a directory ("/lustre/me/run1", made absolute) or
	// S3-compatible object storage ("s3://bucket/path").
	Location string
	// Key signs and verifies manifests and index entries (LoadKey). Without
	// one nothing verifies and nothing can be written: enough for
	// `scrfs list` on a machine without the key.
	Key []byte
	// TrustUnsigned accepts manifests and index entries that carry no MAC
	// (a prefix written before scrfs signed it). A MAC that does not verify
	// is refused whatever this says.
	TrustUnsigned bool
	// Logger receives what the prefix refused and the object store's
	// retries. nil discards them.
	Logger *slog.Logger
}

// Prefix is where datasets outlive the job, whichever kind of store holds
// it: flush, fetch, manifests and the index go through it, so the callers
// above (flush rounds, fetch, scrfs list) never know which. Safe for
// concurrent use; Close it when done.
type Prefix struct {
	s             store
	key           macKey
	trustUnsigned bool
	log           *slog.Logger

	// mu protects warned: refused index entries already logged, so a
	// forged entry is reported once per process, not on every read.
	mu     sync.Mutex
	warned map[string]bool
}

// Open returns the prefix at c.Location. It does not reach the store yet
// (Check does): a directory is created at the first flush, and an
// unreachable object store shows in the errors of what needs it.
func Open(ctx context.Context, c Config) (*Prefix, error) {
	lg := c.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	var (
		s   store
		err error
	)
	switch {
	case c.Location == "":
		return nil, errors.New("no prefix: paths.prefix is not set")
	case layout.PrefixIsS3(c.Location):
		s, err = newS3Store(ctx, c.Location, lg)
	case !filepath.IsAbs(c.Location):
		return nil, fmt.Errorf("prefix %q: a directory prefix must be an absolute path", c.Location)
	default:
		s = newDirStore(filepath.Clean(c.Location))
	}
	if err != nil {
		return nil, err
	}
	return &Prefix{s: s, key: c.Key, trustUnsigned: c.TrustUnsigned, log: lg, warned: map[string]bool{}}, nil
}

// String returns the prefix's location: its directory or URL.
func (p *Prefix) String() string { return p.s.String() }

// Locate returns where dataset's files are, for messages and logs.
func (p *Prefix) Locate(dataset string) string { return p.s.locate(dataset) }

// Check reaches the prefix without changing it: a directory prefix's
// existing parts are checked for owner and mode, an object store's bucket
// is looked up with the credentials. Daemons call it at start to say early
// what would make every flush fail.
func (p *Prefix) Check(ctx context.Context) error {
	if err := p.s.check(ctx); err != nil {
		return fmt.Errorf("prefix %s: %w", p.s, err)
	}
	return nil
}

// Close releases the prefix.
func (p *Prefix) Close() error { return p.s.close() }

// trusted reports whether metadata of trust t may be used.
func (p *Prefix) trusted(t Trust) bool {
	return t == Verified || t == Unsigned && p.trustUnsigned
}

// warnOnce logs a refusal the first time this process sees it.
func (p *Prefix) warnOnce(key, msg string, args ...any) {
	p.mu.Lock()
	seen := p.warned[key]
	p.warned[key] = true
	p.mu.Unlock()
	if !seen {
		p.log.Warn(msg, args...)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
