package cluster

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/scrfs/scrfs/config"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/internal/secretfile"
	"github.com/scrfs/scrfs/layout"
)

// minSecret is the shortest secret accepted, in bytes.
const minSecret = 16

// secretBytes is the size of a secret scrfs creates (64 hex digits).
const secretBytes = 32

// LoadSecret returns the job's shared secret: job.secret (usually from
// SCRFS_JOB_SECRET), else the contents of job.secret_file, else
// <prefix>/.scrfs/secret of a directory prefix, created once with mode
// 0600 by whichever node gets there first so every node of the job reads
// the same one. The file must be yours (root's too, for a root daemon)
// and private (internal/secretfile); the prefix's .scrfs directory is
// verified as the prefix package verifies it.
func LoadSecret(cfg *config.Config) ([]byte, error) {
	if cfg.Job.Secret != "" {
		return []byte(cfg.Job.Secret), nil
	}
	var (
		data []byte
		err  error
		path = cfg.Job.SecretFile
	)
	switch {
	case path != "":
		data, err = secretfile.Read(path, "job secret")
	case cfg.Paths.Prefix == "":
		return nil, errors.New("a job of several nodes needs a shared secret: set job.secret_file, SCRFS_JOB_SECRET or paths.prefix (where one is created)")
	case layout.PrefixIsS3(cfg.Paths.Prefix):
		// Whoever may read the bucket could join the job with it.
		return nil, fmt.Errorf("paths.prefix %s is object storage, where scrfs keeps no job secret: set job.secret_file "+
			"(a file all nodes share, mode 0600) or SCRFS_JOB_SECRET", cfg.Paths.Prefix)
	default:
		path = layout.PrefixMetaDir(cfg.Paths.Prefix) + "/secret"
		data, err = prefixSecret(cfg.Paths.Prefix)
	}
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
var ErrSecretExposed = secretfile.ErrExposed

// prefixSecret reads <prefix>/.scrfs/secret, creating it first if needed.
func prefixSecret(prefix string) ([]byte, error) {
	root, err := jobdir.Base(prefix, true)
	if err != nil {
		return nil, fmt.Errorf("job secret: %w", err)
	}
	defer root.Close()
	meta, err := root.Sub(layout.MetaDir, true)
	if err != nil {
		return nil, fmt.Errorf("job secret: %w", err)
	}
	defer meta.Close()
	if err := secretfile.CreateAt(meta.Fd(), meta.Path(), "secret", secretBytes); err != nil {
		return nil, fmt.Errorf("job secret: %w", err)
	}
	f, err := meta.OpenFile("secret", os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("job secret: %w", err)
	}
	return secretfile.ReadOpen(f, "job secret")
}
