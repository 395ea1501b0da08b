package daemon

import (
	"context"
	"time"

	"github.com/scrfs/scrfs/prefix"
)

// prefixCheckTimeout bounds the look at the prefix at start: an object
// store that does not answer must not hold the daemon up.
const prefixCheckTimeout = 20 * time.Second

// openPrefix opens paths.prefix with the user's prefix key (created on
// first use), or leaves d.prefix nil when no prefix is set. What would
// make every flush fail (a wrong endpoint, a missing bucket, a directory
// another user planted) is logged now, not only at the first flush.
func (d *Daemon) openPrefix(ctx context.Context) error {
	c := d.cfg
	if c.Paths.Prefix == "" {
		return nil
	}
	path, err := prefix.KeyPath(c.Prefix.KeyFile)
	if err != nil {
		return err
	}
	key, err := prefix.LoadKey(path, true)
	if err != nil {
		return err
	}
	p, err := prefix.Open(ctx, prefix.Config{Location: c.Paths.Prefix, Key: key,
		TrustUnsigned: c.Prefix.TrustUnsigned, Logger: d.log})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, prefixCheckTimeout)
	defer cancel()
	if err := p.Check(cctx); err != nil {
		d.log.Warn("the prefix cannot be used as it is: flushes and fetches fail until this is fixed", "err", err)
	}
	d.prefix = p
	return nil
}
