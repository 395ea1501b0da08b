package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

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
	// The daemon's own time for the copy, without its start and mount.
	out["fetch copy"] = sample{wall: logSeconds(b.fetched)}

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
	fmt.Printf("\nratios scrfs time ÷ transfer manager time (target ≤ 1.25): of the medians, and the median [min–max] of each round's\n")
	for _, r := range []struct{ a, b, note string }{
		{"flush", "tm upload", ""},
		{"fetch", "tm download", " (the whole restart: daemon start and mount too)"},
		{"fetch copy", "tm download", " (the fetch as the daemon logs it)"},
	} {
		var per []float64
		for i := range res[r.a] {
			per = append(per, res[r.a][i].wall/res[r.b][i].wall)
		}
		slices.Sort(per)
		fmt.Printf("  %-10s ÷ %-11s %.2f; per round %.2f [%.2f–%.2f]%s\n", r.a, r.b,
			median(res, r.a, false)/median(res, r.b, false), per[len(per)/2], per[0], per[len(per)-1], r.note)
	}
}

// logSeconds returns the seconds= of a daemon's log line.
func logSeconds(line string) float64 {
	_, rest, ok := strings.Cut(line, " seconds=")
	if !ok {
		die("no seconds= in %q", line)
	}
	v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
	check(err)
	return v
}
