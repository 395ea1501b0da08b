package prefix

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/scrfs/scrfs/internal/secretfile"
)

// keyBytes is the size of a key LoadKey creates: HMAC-SHA256's block is
// larger, its output this size.
const keyBytes = 32

// minKeyBytes is the shortest key accepted.
const minKeyBytes = 16

// KeyPath returns the key file to use: configured (prefix.key_file) if set,
// else ~/.config/scrfs/prefix.key of the user running scrfs, a key that
// outlives jobs and, on a cluster whose home directories are shared, is the
// same on every node.
func KeyPath(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	home := os.Getenv("HOME")
	if u, err := user.Current(); err == nil && (home == "" || home == "/") {
		home = u.HomeDir
	}
	if home == "" || home == "/" {
		return "", errors.New("no home directory for the prefix key: set prefix.key_file")
	}
	return filepath.Join(home, ".config", "scrfs", "prefix.key"), nil
}

// LoadKey reads the prefix key from path: hex digits on one line, in a
// file that must be yours and private (mode 0600). With create, a missing
// file is made first with a new random key. Without it, a missing file
// returns an error wrapping fs.ErrNotExist.
func LoadKey(path string, create bool) ([]byte, error) {
	if create {
		if err := secretfile.Create(path, keyBytes); err != nil {
			return nil, fmt.Errorf("prefix key: %w", err)
		}
	}
	b, err := secretfile.Read(path, "prefix key")
	if err != nil {
		return nil, err
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(b)))
	switch {
	case err != nil:
		return nil, fmt.Errorf("prefix key %s: not a line of hex digits: %v", path, err)
	case len(k) < minKeyBytes:
		return nil, fmt.Errorf("prefix key %s holds %d bytes; at least %d are needed", path, len(k), minKeyBytes)
	}
	return k, nil
}

// IsNoKey reports whether LoadKey failed only because the file is missing.
func IsNoKey(err error) bool { return errors.Is(err, fs.ErrNotExist) }
