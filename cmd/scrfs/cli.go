package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/scrfs/scrfs/cluster"
	"github.com/scrfs/scrfs/config"
	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/internal/jobdir"
)

// command is one subcommand.
type command struct {
	name, usage, summary string
	run                  func(env *env, args []string) int
}

func commands() []command {
	return []command{
		{"mount", "scrfs mount [--config FILE] [--prefix DIR] [--job ID] MOUNTPOINT", "run the daemon in the foreground", runMount},
		{"status", "scrfs status [--json] [--wait-ready DURATION] [--control DIR]", "show the node's datasets and state", runStatus},
		{"complete", "scrfs complete [--control DIR] NAME", "mark a dataset complete", runComplete},
		{"flush", "scrfs flush [--wait] [--timeout DURATION] [--force] [--control DIR] [NAME]", "flush a dataset (default: the newest complete one) to the prefix directory", runFlush},
		{"list", "scrfs list [--json] [--set-current NAME] [--prefix DIR] [--config FILE]", "list the datasets in the prefix directory's index", runList},
		{"layout", "scrfs layout [--json] [--config FILE]", "print the redundancy sets and the failures they tolerate", runLayout},
		{"config", "scrfs config [--config FILE]", "print the effective configuration", runConfig},
		{"version", "scrfs version", "print the version", runVersion},
	}
}

// env is what every subcommand gets: its output streams.
type env struct {
	stdout, stderr io.Writer
}

func (e *env) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "scrfs: "+format+"\n", args...)
}

// Main runs the scrfs command line and returns its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(e, args[1:])
		}
	}
	if args[0] == guardCommand { // hidden: not in commands(), so not in help
		return runMountGuard(e, args[1:])
	}
	e.errorf("unknown command %q (try scrfs help)", args[0])
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "scrfs: a checkpoint cache file system for HPC and AI jobs")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun scrfs COMMAND --help for its flags. Documentation: docs/guide.md, docs/cli.md.")
}

// flags returns a FlagSet for c that prints c's usage on --help.
func (e *env) flags(c string) *flag.FlagSet {
	fs := flag.NewFlagSet(c, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	for _, cmd := range commands() {
		if cmd.name == c {
			fs.Usage = func() {
				fmt.Fprintf(e.stderr, "usage: %s\n\n%s.\n\nFlags:\n", cmd.usage, cmd.summary)
				fs.PrintDefaults()
			}
		}
	}
	return fs
}

// parse parses args, returning an exit code when the command should stop.
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// loadConfig loads the configuration as the daemon does: environment >
// user file > /etc/scrfs.toml > defaults.
func (e *env) loadConfig(file string) (*config.Config, bool) {
	cfg, err := config.Load(config.DefaultSources(file))
	if err != nil {
		e.errorf("%v", err)
		return nil, false
	}
	return cfg, true
}

// controlClient finds the daemon: --control DIR, else $SCRFS_CONTROL, else
// the control directory the configuration implies. The client verifies the
// directory on every connection (see control.NewClient).
func (e *env) controlClient(dir, cfgFile string) (*control.Client, bool) {
	if dir == "" {
		dir = os.Getenv("SCRFS_CONTROL")
	}
	if dir == "" {
		cfg, ok := e.loadConfig(cfgFile)
		if !ok {
			return nil, false
		}
		return control.NewClient(cluster.ControlPath(cfg)), true
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		e.errorf("control directory %s: %v", dir, err)
		return nil, false
	}
	return control.NewClient(jobdir.Path{Base: filepath.Dir(abs), Names: []string{filepath.Base(abs)}}), true
}

// exitFor maps a control-API error to an exit code, printing it.
func (e *env) exitFor(err error) int {
	e.errorf("%v", err)
	var ce *control.Error
	switch {
	case errors.Is(err, control.ErrNoDaemon):
		return exitNoDaemon
	case errors.Is(err, jobdir.ErrUnsafe):
		return exitUnsafe
	case errors.As(err, &ce) && ce.Errno == 2: // ENOENT
		return exitNotFound
	}
	return exitError
}

// newLogger builds the daemon's structured logger.
func newLogger(w io.Writer, cfg *config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel()}
	if strings.EqualFold(cfg.Log.Format, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise
// the module version or VCS revision from the build info is used.
var version = ""

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "devel-" + s.Value[:12]
			}
		}
	}
	return "devel"
}

func runVersion(e *env, args []string) int {
	fmt.Fprintln(e.stdout, "scrfs", versionString())
	return exitOK
}

func runConfig(e *env, args []string) int {
	fs := e.flags("config")
	file := fs.String("config", "", "configuration file (TOML)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	cfg, ok := e.loadConfig(*file)
	if !ok {
		return exitConfig
	}
	// What the file allows but the job's layout cannot satisfy (too few
	// nodes for the scheme, say) is as much a configuration error.
	if err := cluster.Check(cfg, os.Environ()); err != nil {
		e.errorf("%v", err)
		return exitConfig
	}
	e.stdout.Write(cfg.TOML())
	return exitOK
}
