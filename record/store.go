package record

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/scrfs/scrfs/internal/atomicfile"
	"github.com/scrfs/scrfs/layout"
)

// Save writes r into the metadata directory of the dataset directory dir,
// atomically: a crash leaves the old record or the new one.
func Save(dir string, r *Record) error {
	b, err := r.Marshal()
	if err != nil {
		return err
	}
	meta := layout.DatasetMetaDir(dir)
	if err := os.MkdirAll(meta, 0o700); err != nil {
		return fmt.Errorf("save record of %s: %w", r.Dataset, err)
	}
	if err := atomicfile.Write(filepath.Join(meta, File), b, 0o600); err != nil {
		return fmt.Errorf("save record of %s: %w", r.Dataset, err)
	}
	return nil
}

// Load reads the record kept in dataset directory dir. A missing record
// wraps os.ErrNotExist; a damaged one ErrBadRecord.
func Load(dir string) (*Record, error) {
	return LoadFile(layout.DatasetRecord(dir))
}

// LoadFile reads the record at path (a dataset's, or one in the prefix),
// as untrusted input.
func LoadFile(path string) (*Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	r, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return r, nil
}

// IsMissing reports whether err says a dataset has no record.
func IsMissing(err error) bool { return errors.Is(err, os.ErrNotExist) }
