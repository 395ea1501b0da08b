package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// torchResult is the real DCP load's rounds, the same world as the save
// and resharded on reshardWorld ranks; skipped says why it was not run.
type torchResult struct {
	rows          int
	same, reshard loadTimes
	skipped       string
}

// torch saves a checkpoint with Debian's torch 1.13 distributed checkpoint
// (one rank per node, each through its node's mount; rank 0 alone makes
// the directory and writes .metadata, which completes it) and the same
// into one plain directory, and loads each with the same world and
// resharded, timing torch's load_state_dict (between two barriers) on
// every rank; the longest rank is the load's time. Every load checks
// every value.
func (b *bench) torch(ctx context.Context, c *job.Cluster) (*torchResult, error) {
	res := &torchResult{rows: b.o.torchRows}
	script, err := filepath.Abs(b.o.torchScript)
	if err == nil {
		_, err = os.Stat(script)
	}
	if err != nil {
		res.skipped = fmt.Sprintf("no script %s (run from the repository root, or give -torch-script): %v", b.o.torchScript, err)
		return res, nil
	}
	probe, cancel := context.WithTimeout(ctx, 2*time.Minute)
	out, err := exec.CommandContext(probe, b.o.python, "-c", "import torch").CombinedOutput()
	cancel()
	if err != nil {
		res.skipped = fmt.Sprintf("%s cannot import torch (Debian: apt-get install python3-torch): %v %s", b.o.python, err, strings.TrimSpace(string(out)))
		return res, nil
	}
	world := len(c.Nodes)
	py := pyRanks{python: b.o.python, script: script, rows: b.o.torchRows}
	for r := 0; r <= b.o.rounds; r++ {
		direct := filepath.Join(b.work, fmt.Sprintf("direct.torch.%d", r))
		if _, err := py.run(ctx, "dcp-save", same(direct, world)); err != nil {
			return res, err
		}
		for _, v := range []struct {
			name  string
			world int
			t     *loadTimes
		}{{"same", world, &res.same}, {"reshard", reshardWorld, &res.reshard}} {
			ds := fmt.Sprintf("torch%s.%d", v.name, r)
			var mounts []string
			for _, n := range c.Nodes {
				mounts = append(mounts, filepath.Join(n.Mount, ds))
			}
			if _, err := py.run(ctx, "dcp-save", mounts); err != nil {
				return res, err
			}
			if err := settled(ctx, c, ds); err != nil {
				return res, err
			}
			err := b.compare(ctx, c, "torch", r, v.name, v.world, v.t,
				func() (time.Duration, error) { return py.run(ctx, "dcp-load", mounts[:v.world]) },
				func() (time.Duration, error) { return py.run(ctx, "dcp-load", same(direct, v.world)) })
			if err != nil {
				return res, fmt.Errorf("%s load of %s: %w", v.name, ds, err)
			}
		}
		if err := os.RemoveAll(direct); err != nil {
			return res, err
		}
	}
	return res, nil
}

// same returns dir n times: every rank in one directory.
func same(dir string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = dir
	}
	return out
}

// pyRanks runs the e2e tests' torch script as the ranks of a job.
type pyRanks struct {
	python, script string
	rows           int
}

// run runs phase on len(dirs) ranks at once, rank r in dirs[r], and
// returns the longest load_seconds a rank printed (0 for a save). Every
// rank must print "ok".
func (p pyRanks) run(ctx context.Context, phase string, dirs []string) (time.Duration, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	outs := make([]string, len(dirs))
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for r, dir := range dirs {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, p.python, p.script, phase, strconv.Itoa(r), strconv.Itoa(len(dirs)), port, dir)
			cmd.Env = append(os.Environ(), "TORCH_CKPT_ROWS="+strconv.Itoa(p.rows))
			b, err := cmd.CombinedOutput()
			outs[r], errs[r] = string(b), err
		})
	}
	wg.Wait()
	var longest time.Duration
	for r := range dirs {
		d, err := loadSeconds(outs[r])
		if errs[r] != nil || err != nil {
			return 0, fmt.Errorf("torch %s, rank %d of %d in %s: %w\n%s", phase, r, len(dirs), dirs[r], errors.Join(errs[r], err), outs[r])
		}
		longest = max(longest, d)
	}
	return longest, nil
}

// loadSeconds reads a rank's output: its load_seconds line, if any, and
// "ok" last.
func loadSeconds(out string) (time.Duration, error) {
	var d time.Duration
	last := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		last = line
		if v, ok := strings.CutPrefix(line, "load_seconds "); ok {
			s, err := strconv.ParseFloat(v, 64)
			if err != nil || s < 0 {
				return 0, fmt.Errorf("bad line %q", line)
			}
			d = time.Duration(s * float64(time.Second))
		}
	}
	if last != "ok" {
		return 0, errors.New(`the rank did not print "ok"`)
	}
	return d, nil
}
