package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/layout"
)

// runFlush asks the daemon to flush a dataset and, with --wait, follows it
// to the end: the end-of-allocation scavenge step of a job script.
func runFlush(e *env, args []string) int {
	fs := e.flags("flush")
	wait := fs.Bool("wait", false, "wait until the flush is over and exit non-zero if it failed")
	timeout := fs.Duration("timeout", 0, "with --wait, give up after this long (0 = no limit)")
	force := fs.Bool("force", false, "flush the dataset again even if it was flushed before")
	dir := fs.String("control", "", "the daemon's control directory (default: from the configuration)")
	file := fs.String("config", "", "configuration file, to find the control directory")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return exitUsage
	}
	c, ok := e.controlClient(*dir, *file)
	if !ok {
		return exitConfig
	}
	ctx := context.Background()
	rep, err := c.Flush(ctx, fs.Arg(0), *force)
	if err != nil {
		return e.exitFor(err)
	}
	switch {
	case rep.Already:
		fmt.Fprintf(e.stdout, "%s was flushed already (--force flushes it again)\n", rep.Name)
		return exitOK
	case !*wait:
		fmt.Fprintf(e.stdout, "flushing %s\n", rep.Name)
		return exitOK
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	return e.followFlush(ctx, c, rep)
}

// flushPoll is how long one --wait request waits for the end of the
// flush; the bar moves at this pace.
const flushPoll = 200 * time.Millisecond

// followFlush polls the flush of rep until it ends, drawing a progress bar
// on a terminal and writing a plain line now and then otherwise.
func (e *env) followFlush(ctx context.Context, c *control.Client, rep *control.FlushReply) int {
	tty := isTerminal(e.stdout)
	var last string
	var lastLine time.Time
	for {
		// A long poll: the answer comes at once when the flush ends.
		p, err := c.FlushProgress(ctx, rep.Name, rep.Round, flushPoll)
		if err != nil {
			if tty && last != "" {
				fmt.Fprintln(e.stdout)
			}
			if ctx.Err() != nil {
				e.errorf("flush of %s not over after --timeout; it goes on in the background", rep.Name)
				return exitError
			}
			return e.exitFor(err)
		}
		switch p.State {
		case control.FlushDone:
			if tty {
				fmt.Fprint(e.stdout, "\r\033[K")
			}
			where := filepath.Join(p.Prefix, rep.Name)
			if layout.PrefixIsS3(p.Prefix) {
				where = strings.TrimSuffix(p.Prefix, "/") + "/" + rep.Name // Join would make s3:/
			}
			fmt.Fprintf(e.stdout, "%s flushed to %s\n", rep.Name, where)
			return exitOK
		case control.FlushFailed:
			if tty && last != "" {
				fmt.Fprintln(e.stdout)
			}
			e.errorf("flush of %s failed: %s", rep.Name, p.Error)
			return exitError
		}
		if tty {
			line := progressBar(rep.Name, p.Flush, 30)
			if line != last {
				fmt.Fprint(e.stdout, "\r\033[K"+line)
				last = line
			}
		} else if key := plainKey(p.Flush); key != last || time.Since(lastLine) >= 10*time.Second {
			// Plain output goes to logs: a line per state change or 10%
			// step, and every 10 s while nothing moves.
			fmt.Fprintln(e.stdout, flushLine(rep.Name, p.Flush))
			last, lastLine = key, time.Now()
		}
	}
}

// progressBar renders a one-line bar: "ckpt.5 [=====>    ] 45% 1.2 GiB/2.6 GiB 350.0 MiB/s ETA 4s".
func progressBar(name string, f control.Flush, width int) string {
	frac := 0.0
	if f.TotalBytes > 0 {
		frac = float64(f.DoneBytes) / float64(f.TotalBytes)
	}
	filled := min(width, int(frac*float64(width)))
	bar := strings.Repeat("=", filled)
	if filled < width {
		bar += ">" + strings.Repeat(" ", width-filled-1)
	}
	return fmt.Sprintf("%s [%s] %s", name, bar, flushDetail(f))
}

// plainKey changes when a plain progress line is worth writing.
func plainKey(f control.Flush) string {
	step := int64(0)
	if f.TotalBytes > 0 {
		step = 10 * f.DoneBytes / f.TotalBytes
	}
	return fmt.Sprintf("%s %v %d", f.State, f.Waiting, step)
}

// flushLine is the plain-output form: "ckpt.5: flushing 45% (...)".
func flushLine(name string, f control.Flush) string {
	return fmt.Sprintf("%s: %s", name, flushDetail(f))
}

// flushDetail says where a flush is, for the bar, the plain lines and the
// NOTE column of scrfs status.
func flushDetail(f control.Flush) string {
	switch {
	case f.State == control.FlushScheduled:
		return "scheduled"
	case f.Waiting:
		return fmt.Sprintf("this node's %s flushed, waiting for the other nodes", humanBytes(f.TotalBytes))
	case f.State == control.FlushRunning && f.TotalBytes > 0:
		s := fmt.Sprintf("flushing %d%% (%s of %s", 100*f.DoneBytes/f.TotalBytes, humanBytes(f.DoneBytes), humanBytes(f.TotalBytes))
		if f.Rate > 0 {
			s += fmt.Sprintf(", %s/s", humanBytes(int64(f.Rate)))
		}
		if f.ETA > 0 {
			s += ", ETA " + roundDuration(f.ETA)
		}
		return s + ")"
	case f.Error != "":
		return f.State + ": " + f.Error
	}
	return f.State
}

// isTerminal reports whether w is a terminal, where a bar redrawn in
// place reads well; in a log file it would be noise.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
