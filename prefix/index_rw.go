package prefix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
)

// ReadIndex returns the job index, each entry's Trust set from its MAC and
// Current kept only if its MAC verifies (else a warning says why it is
// ignored). A prefix without an index (nothing flushed yet) has an empty
// one, not an error; a corrupt index is an error wrapping ErrBadMetadata
// that names the file. Entries the prefix does not trust stay in the
// index, for `scrfs list` to show, but Newest never offers them.
func (p *Prefix) ReadIndex(ctx context.Context) (*Index, error) {
	b, err := p.s.readMeta(ctx, indexName)
	if errors.Is(err, fs.ErrNotExist) {
		ix := emptyIndex()
		ix.trustUnsigned = p.trustUnsigned
		return ix, nil
	}
	if err != nil {
		return nil, pathErr("read index", p.metaLoc(indexName), err)
	}
	ix, err := p.openIndex(b)
	if err != nil {
		return nil, fmt.Errorf("read index %s: %w", p.metaLoc(indexName), err)
	}
	return ix, nil
}

// openIndex decodes an index and verifies it.
func (p *Prefix) openIndex(b []byte) (*Index, error) {
	ix, err := decodeIndex(b)
	if err != nil {
		return nil, err
	}
	ix.trustUnsigned = p.trustUnsigned
	for i := range ix.Datasets {
		e := &ix.Datasets[i]
		e.Trust = p.key.check(kindEntry, entryBytes(e), e.MAC)
		if !p.trusted(e.Trust) {
			p.warnOnce("entry "+e.Name+" "+e.MAC, "the prefix index lists a dataset that will never be fetched",
				"dataset", e.Name, "prefix", p.s.String(), "why", refusal("its index entry", p.metaLoc(indexName), e.Trust))
		}
	}
	if ix.Current != "" {
		if t := p.key.check(kindCurrent, []byte(ix.Current), ix.CurrentMAC); !p.trusted(t) {
			p.warnOnce("current "+ix.Current+" "+ix.CurrentMAC, "ignoring the current dataset the prefix index names",
				"dataset", ix.Current, "prefix", p.s.String(), "why", refusal("its current mark", p.metaLoc(indexName), t))
			ix.Current = ""
		}
	}
	return ix, nil
}

// entryBytes is what an entry's MAC signs: the entry as JSON without its
// MAC, in the form it takes after one trip through the index file (JSON
// turns invalid UTF-8 into U+FFFD and would otherwise break the MAC of a
// name or reason that held some).
func entryBytes(e *IndexEntry) []byte {
	c := *e
	c.MAC = ""
	b, _ := json.Marshal(c) // plain data: never fails
	var back IndexEntry
	if json.Unmarshal(b, &back) == nil {
		b, _ = json.Marshal(back)
	}
	return b
}

// errNoWrite, returned by an UpdateIndex callback, ends the update without
// writing and without error.
var errNoWrite = errors.New("index unchanged")

// UpdateIndex runs f on the current index and replaces the index with the
// result, atomically and durably, so that concurrent updaters on any node
// are serialised and none loses another's change (a lock on a directory,
// conditional writes on object storage; there f may run again after a
// conflict). If f returns an error, or the result does not validate, the
// index is left as it was. A corrupt index is never overwritten: the error
// wraps ErrBadMetadata.
//
// Entries f added or changed, and a changed Current, are signed with the
// prefix key; the others keep their MACs as they were, so an entry the
// prefix does not trust is never signed as if it were ours. lg (nil: none)
// hears of a file system without locks.
func (p *Prefix) UpdateIndex(ctx context.Context, lg *slog.Logger, f func(*Index) error) error {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	where := p.metaLoc(indexName)
	err := p.s.updateIndex(ctx, lg, func(cur []byte) ([]byte, error) {
		ix := emptyIndex()
		ix.trustUnsigned = p.trustUnsigned
		if cur != nil {
			var err error
			if ix, err = p.openIndex(cur); err != nil {
				return nil, fmt.Errorf("update index %s: %w", where, err)
			}
		}
		before := map[string]string{}
		for i := range ix.Datasets {
			before[ix.Datasets[i].Name] = string(entryBytes(&ix.Datasets[i]))
		}
		current := ix.Current
		if err := f(ix); err != nil {
			return nil, err
		}
		ix.Version = FormatVersion
		if ix.Datasets == nil {
			ix.Datasets = []IndexEntry{}
		}
		if err := p.sign(ix, before, current); err != nil {
			return nil, fmt.Errorf("update index %s: %w", where, err)
		}
		if err := ix.validate(); err != nil {
			return nil, fmt.Errorf("update index %s: refusing to write an invalid index: %w", where, err)
		}
		ix.sort()
		b, err := encodeIndex(ix)
		if err != nil {
			return nil, fmt.Errorf("update index %s: %w", where, err)
		}
		return b, nil
	})
	switch {
	case errors.Is(err, errNoWrite):
		return nil
	case err != nil && !errors.Is(err, ErrBadMetadata) && !errors.Is(err, ErrUnverified):
		return pathErr("update index", where, err)
	}
	return err
}

// sign gives a MAC to every entry that differs from what was read (before,
// by name) and to a changed Current.
func (p *Prefix) sign(ix *Index, before map[string]string, current string) error {
	for i := range ix.Datasets {
		e := &ix.Datasets[i]
		b := entryBytes(e)
		if old, ok := before[e.Name]; ok && old == string(b) {
			continue
		}
		if p.key == nil {
			return errNoKey
		}
		e.MAC, e.Trust = p.key.sum(kindEntry, b), Verified
	}
	switch {
	case ix.Current == current:
	case ix.Current == "":
		ix.CurrentMAC = ""
	case p.key == nil:
		return errNoKey
	default:
		ix.CurrentMAC = p.key.sum(kindCurrent, []byte(ix.Current))
	}
	return nil
}
