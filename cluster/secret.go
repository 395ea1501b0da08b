package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

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
	data, err := readPrivate(path)
	if err != nil {
		return nil, err
	}
	secret := strings.TrimSpace(string(data))
	if len(secret) < minSecret {
		return nil, fmt.Errorf("job secret %s holds %d bytes; at least %d are needed", path, len(secret), minSecret)
	}
	return []byte(secret), nil
}

// ErrSecretExposed means the secret file can be read by users other than
// its owner: any of them could join the job's peer network.
var ErrSecretExposed = errors.New("job secret file is readable by group or others")

// readPrivate reads the secret file, refusing one that group or others may
// read (or one owned by another user, who could swap it), as ssh does with
// private keys. The check is on the open file, so a rename in between
// changes nothing.
func readPrivate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("job secret: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("job secret: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("job secret %s is not a regular file", path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%w: %s has mode %04o; run chmod 600 %s (and choose a new secret if others may have read it)",
			ErrSecretExposed, path, fi.Mode().Perm(), path)
	case ok && int(st.Uid) != os.Geteuid() && os.Geteuid() != 0:
		return nil, fmt.Errorf("job secret %s belongs to uid %d, not to you (uid %d), who could change it", path, st.Uid, os.Geteuid())
	}
	// A secret is a line of hex; anything large is not one.
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("job secret: %w", err)
	}
	return data, nil
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
