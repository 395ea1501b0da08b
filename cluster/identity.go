package cluster

import (
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/scrfs/scrfs/config"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/layout"
)

// UserName returns the name scrfs puts in cache and control paths: the
// current user's login name, else $USER, else the numeric uid. A name that
// is not a single path component is never used.
func UserName() string {
	if u, err := user.Current(); err == nil && pathSafe(u.Username) {
		return u.Username
	}
	if u := os.Getenv("USER"); pathSafe(u) {
		return u
	}
	return strconv.Itoa(os.Geteuid())
}

func pathSafe(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// CachePath returns the job's cache directory under cfg:
// <cache_base>/<user>/scrfs.<job>, the last two verified when opened.
func CachePath(cfg *config.Config) jobdir.Path {
	return jobdir.Path{Base: cfg.Paths.CacheBase, Names: []string{UserName(), layout.JobDirName(cfg.Job.ID)}}
}

// ControlPath returns the job's control directory under cfg; the CLI finds
// the daemon's socket there.
func ControlPath(cfg *config.Config) jobdir.Path {
	return jobdir.Path{Base: cfg.Paths.ControlBase, Names: []string{UserName(), layout.JobDirName(cfg.Job.ID)}}
}
