package cluster

import (
	"os"
	"os/user"
	"strconv"

	"github.com/scrfs/scrfs/config"
	"github.com/scrfs/scrfs/layout"
)

// UserName returns the name scrfs puts in cache and control paths: the
// current user's login name, else $USER, else the numeric uid.
func UserName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
}

// CacheDir returns the job's cache directory under cfg.
func CacheDir(cfg *config.Config) string {
	return layout.JobDir(cfg.Paths.CacheBase, UserName(), cfg.Job.ID)
}

// ControlDir returns the job's control directory under cfg; the CLI finds
// the daemon's socket there.
func ControlDir(cfg *config.Config) string {
	return layout.JobDir(cfg.Paths.ControlBase, UserName(), cfg.Job.ID)
}
