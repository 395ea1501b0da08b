package job

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Main is a benchmark's main: it parses the command line with parse
// (exit status 2 on a bad one, 0 for -h), runs run until it returns or
// the process is interrupted, and exits 1 with run's error. The report
// goes to stdout, progress and errors to stderr.
func Main[O any](name string, parse func(args []string, stderr io.Writer) (O, error),
	run func(ctx context.Context, o O, stdout, stderr io.Writer) error) {
	o, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// SettingsFlag defines -set on fs: an extra daemon setting
// SCRFS_SECTION_KEY=VALUE, repeatable, appended to settings.
func SettingsFlag(fs *flag.FlagSet, settings *[]string) {
	SettingFlag(fs, "set", "extra daemon setting SCRFS_SECTION_KEY=VALUE (repeatable), e.g. SCRFS_REDUNDANCY_PIECE_SIZE=4MiB", settings)
}

// SettingFlag defines a repeatable flag name whose values are
// SCRFS_SECTION_KEY=VALUE settings, appended to dst.
func SettingFlag(fs *flag.FlagSet, name, usage string, dst *[]string) {
	fs.Func(name, usage, func(v string) error {
		if !strings.HasPrefix(v, "SCRFS_") || !strings.Contains(v, "=") {
			return fmt.Errorf("want SCRFS_SECTION_KEY=VALUE")
		}
		*dst = append(*dst, v)
		return nil
	})
}
