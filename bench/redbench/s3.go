package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/scrfs/scrfs/internal/s3test"
)

// s3run is the object store of -s3: versitygw on loopback over -disk, whose
// address and keys the daemons take from this process's environment, and
// the transfer manager program the fetch is compared with.
type s3run struct {
	srv   *s3test.Server
	bound string // bench/s3bound, built
}

func startS3(work, disk string) (*s3run, error) {
	bound := filepath.Join(work, "s3bound")
	if out, err := exec.Command("go", "build", "-o", bound, "github.com/scrfs/scrfs/bench/s3bound").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build s3bound: %w\n%s", err, out)
	}
	srv, err := s3test.Run(filepath.Join(disk, "s3"))
	if err != nil {
		return nil, err
	}
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	return &s3run{srv: srv, bound: bound}, nil
}

// download is the transfer manager fetching every object below prefix
// into dst with as many transfers at once as the job's daemons run (4
// streams each, flush.streams' default).
func (s *s3run) download(ctx context.Context, nodes int, prefix, dst string) *exec.Cmd {
	return exec.CommandContext(ctx, s.bound, "-concurrency", strconv.Itoa(4*nodes), "-down", prefix, dst)
}
