package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/scrfs/scrfs/internal/s3test"
)

// s3run is the object store of a -s3 run: versitygw on loopback over a
// directory on -disk, and the transfer manager program the flush and the
// fetch are compared with.
type s3run struct {
	srv   *s3test.Server
	bound string // bench/s3bound, built
}

func startS3(work, disk string) *s3run {
	bound := filepath.Join(work, "s3bound")
	if out, err := exec.Command("go", "build", "-o", bound, "./bench/s3bound").CombinedOutput(); err != nil {
		die("build s3bound: %v\n%s", err, out)
	}
	srv, err := s3test.Run(filepath.Join(disk, "s3"))
	check(err)
	cleanups = append(cleanups, srv.Kill)
	return &s3run{srv: srv, bound: bound}
}

// roundS3 measures the flush to the bucket, the transfer manager's upload
// of the same files, the fetch (a restart with a wiped cache) and the
// transfer manager's download of the flushed objects into tmpfs. CPU is
// the client's (the daemon's, the program's); the server's, the same work
// for both, is shown apart.
func (b *bench) roundS3(force bool, s *s3run) map[string]sample {
	out := map[string]sample{}
	srv0 := procCPU(s.srv.Pid())
	out["flush"] = b.flushOnce(force)
	out["server flush"] = sample{cpu: procCPU(s.srv.Pid()) - srv0}

	srv0 = procCPU(s.srv.Pid())
	out["tm upload"] = b.bound(s, "-up", b.cacheDS(), s.srv.Prefix("bound/"+dataset))
	out["server tm upload"] = sample{cpu: procCPU(s.srv.Pid()) - srv0}

	srv0 = procCPU(s.srv.Pid())
	out["fetch"] = b.fetchOnce()
	out["server fetch"] = sample{cpu: procCPU(s.srv.Pid()) - srv0}

	back := filepath.Join(b.work, "back")
	srv0 = procCPU(s.srv.Pid())
	out["tm download"] = b.bound(s, "-down", s.srv.Prefix("flushbench/"+dataset), back)
	out["server tm download"] = sample{cpu: procCPU(s.srv.Pid()) - srv0}
	os.RemoveAll(back)
	return out
}

// bound runs the transfer manager program, written back first as the
// flush is.
func (b *bench) bound(s *s3run, dir, from, to string) sample {
	syncAll()
	cmd := exec.Command(s.bound, "-concurrency", strconv.Itoa(*streams), dir, from, to)
	cmd.Env = append(os.Environ(), s.srv.Env()...)
	return timed(cmd)
}

// reportS3 prints the medians and the ratios to the bound (scrfs time ÷
// transfer manager time: the target is ≤ 1.25).
func reportS3(res map[string][]sample, size int64) {
	fmt.Printf("\nmedians of %d rounds (%s), S3 on loopback (versitygw); CPU s is the client's:\n", *rounds, human(size))
	table(res, size, []string{"flush", "tm upload", "fetch", "tm download"})
	fmt.Printf("server CPU s/GiB: flush %.2f, tm upload %.2f, fetch %.2f, tm download %.2f\n",
		median(res, "server flush", true)/(float64(size)/(1<<30)), median(res, "server tm upload", true)/(float64(size)/(1<<30)),
		median(res, "server fetch", true)/(float64(size)/(1<<30)), median(res, "server tm download", true)/(float64(size)/(1<<30)))
	fmt.Printf("\nratios (scrfs time ÷ transfer manager time; target ≤ 1.25):\n")
	fmt.Printf("  flush ÷ tm upload      %.2f\n", median(res, "flush", false)/median(res, "tm upload", false))
	fmt.Printf("  fetch ÷ tm download    %.2f\n", median(res, "fetch", false)/median(res, "tm download", false))
}
