package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/scrfs/scrfs/cluster"
	"github.com/scrfs/scrfs/daemon"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/layout"
)

// errSignal is the cancellation cause when SIGINT or SIGTERM arrives.
var errSignal = errors.New("signal received")

func runMount(e *env, args []string) int {
	fs := e.flags("mount")
	file := fs.String("config", "", "configuration file (TOML); /etc/scrfs.toml and SCRFS_* variables apply too")
	prefix := fs.String("prefix", "", "prefix directory on the parallel file system, or s3://bucket/path (overrides paths.prefix)")
	job := fs.String("job", "", "job id (overrides job.id)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	cfg, ok := e.loadConfig(*file)
	if !ok {
		return exitConfig
	}
	if *prefix != "" {
		cfg.Paths.Prefix = *prefix
		if !layout.PrefixIsS3(*prefix) {
			abs, err := filepath.Abs(*prefix)
			if err != nil {
				e.errorf("--prefix: %v", err)
				return exitUsage
			}
			cfg.Paths.Prefix = abs
		}
	}
	if *job != "" {
		cfg.Job.ID = *job
	}
	if err := cfg.Validate(); err != nil {
		e.errorf("%v", err)
		return exitConfig
	}
	if err := cluster.Check(cfg, os.Environ()); err != nil {
		e.errorf("%v", err)
		return exitConfig
	}
	log := newLogger(e.stderr, cfg)

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		select {
		case s := <-sig:
			log.Info("signal received", "signal", s.String())
			cancel(errSignal)
		case <-ctx.Done(): // the daemon stopped by itself
		}
	}()

	err := daemon.Run(ctx, daemon.Options{Config: cfg, Mountpoint: fs.Arg(0), Logger: log, Version: versionString(),
		GuardArgs: []string{guardCommand}})
	if errors.Is(err, jobdir.ErrUnsafe) {
		e.errorf("%v", err)
		return exitUnsafe
	}
	if err != nil {
		e.errorf("%v", err)
		return exitMount
	}
	return exitOK
}
