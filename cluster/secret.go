package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/scrfs/scrfs/config"
	"github.com/scrfs/scrfs/layout"
)

// minSecret is the shortest secret accepted, in bytes.
const minSecret = 16

// LoadSecret returns the job's shared secret: job.secret (usually from
// SCRFS_JOB_SECRET), else the contents of job.secret_file, else
// <prefix>/.scrfs/secret, created once with mode 0600 by whichever node gets
// there first so every node of the job reads the same one.
func LoadSecret(cfg *config.Config) ([]byte, error) {
	if cfg.Job.Secret != "" {
		return []byte(cfg.Job.Secret), nil
	}
	path := cfg.Job.SecretFile
	if path == "" {
		if cfg.Paths.Prefix == "" {
			return nil, errors.New("a job of several nodes needs a shared secret: set job.secret_file, SCRFS_JOB_SECRET or paths.prefix (where one is created)")
		}
		path = filepath.Join(layout.PrefixMetaDir(cfg.Paths.Prefix), "secret")
		if err := createSecret(path); err != nil {
			return nil, err
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("job secret: %w", err)
	}
	secret := strings.TrimSpace(string(data))
	if len(secret) < minSecret {
		return nil, fmt.Errorf("job secret %s holds %d bytes; at least %d are needed", path, len(secret), minSecret)
	}
	return []byte(secret), nil
}

// createSecret creates path with a random secret unless it exists. The
// secret is written to a temporary file and hard-linked into place, so a
// node that races us never reads a half-written secret.
func createSecret(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("job secret: %w", err)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-*")
	if err != nil {
		return fmt.Errorf("job secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(raw) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("job secret: create %s: %w", path, err)
	}
	return nil
}
