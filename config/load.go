package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/scrfs/scrfs/layout"
)

// SystemFile is the system-wide configuration file, as SCR's system
// configuration file.
const SystemFile = "/etc/scrfs.toml"

// Sources says where Load reads from.
type Sources struct {
	SystemFile string   // "" = skip; a missing system file is not an error
	UserFile   string   // "" = none; a missing user file IS an error
	Env        []string // "KEY=VALUE" entries, usually os.Environ()
}

// DefaultSources returns the sources of the scrfs command: SystemFile, the
// given user file ("" for none) and the process environment.
func DefaultSources(userFile string) Sources {
	return Sources{SystemFile: SystemFile, UserFile: userFile, Env: os.Environ()}
}

// Load layers defaults < system file < user file < environment, resolves
// derived defaults (job.id from SLURM_JOB_ID, else "local"; relative
// paths.prefix, job.secret_file and cluster.hostfile made absolute against
// the current directory), and validates.
//
// On failure it returns a nil Config and every problem found, joined: each is
// an *Error naming the key and the file and line or environment variable it
// came from. A missing user file wraps fs.ErrNotExist.
func Load(src Sources) (*Config, error) {
	return load(src, os.ReadFile)
}

// load is Load with the file reader injected, so fuzzing needs no files.
func load(src Sources, readFile func(string) ([]byte, error)) (*Config, error) {
	c := Default()
	origins := make(map[string]origin)
	var errs []*Error
	if src.SystemFile != "" {
		data, err := readFile(src.SystemFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The system file is optional, as in SCR.
		case err != nil:
			errs = append(errs, readError(src.SystemFile, err))
		default:
			errs = append(errs, applyFile(c, src.SystemFile, data, origins)...)
		}
	}
	if src.UserFile != "" {
		data, err := readFile(src.UserFile)
		if err != nil {
			errs = append(errs, readError(src.UserFile, err))
		} else {
			errs = append(errs, applyFile(c, src.UserFile, data, origins)...)
		}
	}
	errs = append(errs, applyEnv(c, src.Env, origins)...)
	if e := c.resolve(src.Env, origins); e != nil {
		errs = append(errs, e)
	}
	// Validate even after decoding errors: keys that failed kept valid
	// values from a lower layer, and the user gets every problem in one go.
	for _, e := range c.validate() {
		e.locate(origins)
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return c, nil
}

// readError reports a file that cannot be read, without repeating its name.
func readError(name string, err error) *Error {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	return &Error{File: name, Msg: "cannot read: " + msg, Cause: err}
}

// resolve fills in derived defaults once all layers are applied.
func (c *Config) resolve(env []string, origins map[string]origin) *Error {
	if c.Job.ID == "" {
		c.Job.ID = "local"
		if id, ok := lookupEnv(env, "SLURM_JOB_ID"); ok && id != "" {
			c.Job.ID = id
			origins["job.id"] = origin{env: "SLURM_JOB_ID", envValue: id}
		}
	}
	// The daemon may change directory; a path the user wrote relative to
	// where they started it must keep meaning the same place.
	for _, p := range []struct {
		key string
		ptr *string
	}{
		{"paths.prefix", &c.Paths.Prefix},
		{"job.secret_file", &c.Job.SecretFile},
		{"prefix.key_file", &c.Prefix.KeyFile},
		{"cluster.hostfile", &c.Cluster.Hostfile},
	} {
		if *p.ptr == "" || filepath.IsAbs(*p.ptr) || layout.PrefixIsS3(*p.ptr) {
			continue
		}
		abs, err := filepath.Abs(*p.ptr)
		if err != nil {
			e := &Error{Key: p.key, Value: quote(*p.ptr), Kind: ErrInvalid, Cause: err,
				Msg: "cannot make the path absolute: " + err.Error()}
			e.locate(origins)
			return e
		}
		*p.ptr = abs
	}
	return nil
}
