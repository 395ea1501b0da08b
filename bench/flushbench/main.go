// Command flushbench measures scrfs's flush and fetch side by side with
// cp -r of the same tree, in one run: a dataset of many files is written
// through a real scrfs mount whose cache is on tmpfs, then, round after
// round,
//
//	flush:    scrfs flush --wait (parallel streams, CRC32C, fsync per file)
//	cp:       cp -r of the cache directory to the same disk
//	cp+sync:  the same, followed by sync (flush is durable, cp alone is not)
//	fetch:    daemon restart with a wiped cache: the fetch from the prefix
//	cp back:  cp -r of the flushed tree back to tmpfs
//
// and with -restart the restart as the application sees it (restart.go):
// its first byte and the whole dataset read through the mount, against
// cp -r back and the same reads.
//
// after one untimed warm-up round, and prints medians, CPU time and the
// ratios the project's targets are stated in (cp time ÷ scrfs time, so
// above 1.0 means scrfs is faster).
//
//	go run ./bench/flushbench [-cache /dev/shm] [-disk /tmp] [-size 4GiB] [-large 32] [-small 1024] [-rounds 3]
//
// With -s3 the prefix is S3 object storage instead: a versitygw on
// loopback serving a directory in -disk (internal/s3test), and the
// baselines are the same bytes moved by a plain program with the AWS SDK's
// transfer manager (bench/s3bound): its upload of the cache directory, and
// its download of the flushed objects to tmpfs.
//
// With -ab BIN this tree's scrfs and an older build BIN flush and fetch the
// same dataset (each its own daemon, cache and prefix directory), taking
// turns in an order that alternates from round to round, and the report
// gives each side's medians and the median of the per-round ratios B ÷ A
// (this tree is B), which is what the change did.
//
// The cache directory must be on tmpfs and the disk directory on a real
// disk (not tmpfs), as on a compute node flushing to a parallel file system.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

var (
	cacheBase = flag.String("cache", "/dev/shm", "tmpfs directory for the scrfs cache")
	diskBase  = flag.String("disk", "/tmp", "directory on disk for the prefix and the cp copies")
	sizeArg   = flag.String("size", "4GiB", "dataset size")
	large     = flag.Int("large", 32, "large files, together 3/4 of the size")
	small     = flag.Int("small", 1024, "small files, together 1/4 of the size")
	rounds    = flag.Int("rounds", 3, "measured rounds (after one untimed warm-up)")
	streams   = flag.Int("streams", 4, "flush.streams")
	crc       = flag.Bool("crc", true, "flush.crc")
	useS3     = flag.Bool("s3", false, "prefix in S3 (versitygw on loopback over -disk), compared with the AWS SDK's transfer manager")
	restart   = flag.Bool("restart", false, "also time a restart as the application sees it: the first byte and the whole dataset read through the mount, against cp -r back and the same reads")
	abBin     = flag.String("ab", "", "compare with this older scrfs binary (A) in alternating rounds (this tree is B)")
)

const dataset = "ckpt.1"

// sample is one timed operation: wall seconds and CPU seconds of the
// process that did the work (the daemon for flush and fetch, cp for cp).
type sample struct{ wall, cpu float64 }

func main() {
	flag.Parse()
	size, err := parseSize(*sizeArg)
	check(err)
	work, err := os.MkdirTemp(*cacheBase, "flushbench-")
	check(err)
	cleanups = append(cleanups, func() { os.RemoveAll(work) })
	defer cleanup()
	disk, err := os.MkdirTemp(*diskBase, "flushbench-")
	check(err)
	cleanups = append(cleanups, func() { os.RemoveAll(disk) })
	warnIfTmpfs(disk)
	bin := filepath.Join(work, "scrfs")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/scrfs").CombinedOutput(); err != nil {
		die("build scrfs: %v\n%s", err, out)
	}
	var benches []*bench
	add := func(label, bin string) {
		dir := filepath.Join(work, "run-"+label)
		check(os.MkdirAll(dir, 0o755))
		b := &bench{label: label, bin: bin, work: dir, prefix: filepath.Join(disk, label+"-pfs"), disk: disk}
		benches = append(benches, b)
		cleanups = append(cleanups, b.stop)
	}
	var s3 *s3run
	switch {
	case *abBin != "" && *useS3:
		die("-ab compares directory prefixes: the older build may know no other")
	case *abBin != "":
		add("A", *abBin)
		add("B", bin)
	default:
		add("scrfs", bin)
	}
	if *useS3 {
		s3 = startS3(work, disk)
		benches[0].prefix = s3.srv.Prefix("flushbench")
		benches[0].env = s3.srv.Env()
	}
	for _, b := range benches {
		b.start()
		b.files = writeDataset(filepath.Join(b.work, "mnt", dataset), size)
		b.cli("complete", dataset)
		b.waitLog("dataset complete")
		fmt.Printf("%s: dataset %s: %d files, %s, cache %s, prefix %s, streams %d, crc %v\n",
			b.label, dataset, b.files, human(size), *cacheBase, b.prefix, *streams, *crc)
	}

	res := map[string][]sample{}
	for r := 0; r <= *rounds; r++ {
		order := benches
		if r%2 == 0 && len(benches) == 2 {
			order = []*bench{benches[1], benches[0]}
		}
		line := fmt.Sprintf("round %d:", r)
		for _, b := range order {
			one := map[string]sample{}
			switch {
			case s3 != nil:
				one = b.roundS3(r > 0, s3)
			case len(benches) == 2:
				one = b.roundAB(r > 0)
			default:
				one = b.round(r > 0)
			}
			for _, k := range sortedKeys(one) {
				if !strings.HasPrefix(k, "server ") {
					line += fmt.Sprintf("  %s %.2fs", k, one[k].wall)
				}
			}
			if r == 0 {
				continue // warm-up: page tables, the disk's allocator, the binaries
			}
			for k, v := range one {
				res[k] = append(res[k], v)
			}
		}
		fmt.Println(line)
	}
	switch {
	case s3 != nil:
		reportS3(res, size)
	case len(benches) == 2:
		reportAB(res, size)
	default:
		report(res, size)
	}
}

type bench struct {
	label                   string // its operations' names start with it in an A/B run
	bin, work, prefix, disk string
	env                     []string // more environment of the daemon: the S3 endpoint's
	files                   int
	cmd                     *exec.Cmd
	lines                   chan string
	fetched                 string // the "dataset fetched" line of the last start, if any
}

func (b *bench) environ() []string {
	return append(append(os.Environ(), b.env...),
		"SCRFS_PREFIX_KEY_FILE="+filepath.Join(b.work, "prefix.key"),
		"SCRFS_PATHS_CACHE_BASE="+filepath.Join(b.work, "cache"),
		"SCRFS_PATHS_CONTROL_BASE="+filepath.Join(b.work, "control"),
		"SCRFS_PATHS_PREFIX="+b.prefix,
		"SCRFS_JOB_ID=flushbench", "SCRFS_METRICS_LISTEN=", "SCRFS_DATASETS_COMPLETE=",
		"SCRFS_FLUSH_EVERY=0", "SCRFS_FLUSH_STREAMS="+strconv.Itoa(*streams), "SCRFS_FLUSH_CRC="+strconv.FormatBool(*crc),
		"SCRFS_DATASETS_CACHE_SIZE=4")
}

// start runs the daemon and returns once it is ready.
func (b *bench) start() {
	b.startNoWait()
	b.waitLog("scrfs ready")
}

// startNoWait starts the daemon; its log lines go to b.lines.
func (b *bench) startNoWait() {
	b.cmd = exec.Command(b.bin, "mount", filepath.Join(b.work, "mnt"))
	b.cmd.Env = b.environ()
	stderr, err := b.cmd.StderrPipe()
	check(err)
	check(b.cmd.Start())
	b.lines = make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case b.lines <- sc.Text():
			default: // nobody waits for these
			}
		}
		close(b.lines)
	}()
	b.fetched = ""
}

// waitLog returns the next daemon log line containing s, remembering a
// fetch logged on the way (it comes before "scrfs ready").
func (b *bench) waitLog(s string) string {
	for l := range b.lines {
		if strings.Contains(l, "dataset fetched") {
			b.fetched = l
		}
		if strings.Contains(l, s) {
			return l
		}
	}
	die("daemon exited before logging %q", s)
	return ""
}

// stop ends the daemon (it unmounts on SIGTERM); stopping a stopped one
// does nothing.
func (b *bench) stop() {
	if b.cmd == nil || b.cmd.ProcessState != nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	b.cmd.Wait()
}

func (b *bench) cli(args ...string) {
	cmd := exec.Command(b.bin, args...)
	cmd.Env = append(b.environ(), "SCRFS_CONTROL="+filepath.Join(b.work, "control", user(), "scrfs.flushbench"))
	if out, err := cmd.CombinedOutput(); err != nil {
		die("scrfs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// round measures each operation once. The page cache is written back
// (untimed) before each, so no operation pays for the previous one's dirty
// pages.
func (b *bench) round(force bool) map[string]sample {
	out := map[string]sample{}
	out["flush"] = b.flushOnce(force)
	dst := filepath.Join(b.disk, "cp")
	os.RemoveAll(dst)
	syncAll()
	out["cp"] = runTimed("cp", "-r", b.cacheDS(), dst)
	t1 := time.Now()
	syncAll()
	out["cp+sync"] = sample{out["cp"].wall + time.Since(t1).Seconds(), out["cp"].cpu}
	os.RemoveAll(dst)
	syncAll()
	out["fetch"] = b.fetchOnce()
	back := filepath.Join(b.work, "back")
	out["cp back"] = runTimed("cp", "-r", filepath.Join(b.prefix, dataset), back)
	os.RemoveAll(back)
	if *restart {
		out["restart first byte"], out["restart read all"] = b.restartOnce()
		out["cp back+read"] = b.cpReadOnce()
	}
	return out
}

// roundAB measures one side of an A/B run: its flush and its fetch.
func (b *bench) roundAB(force bool) map[string]sample {
	return map[string]sample{b.label + " flush": b.flushOnce(force), b.label + " fetch": b.fetchOnce()}
}

// cacheDS is the dataset's directory in the cache.
func (b *bench) cacheDS() string {
	return filepath.Join(b.work, "cache", user(), "scrfs.flushbench", dataset)
}

// flushOnce times scrfs flush --wait of the dataset, from a prefix
// without it (a directory prefix: its copy removed first).
func (b *bench) flushOnce(force bool) sample {
	if !strings.HasPrefix(b.prefix, "s3://") {
		os.RemoveAll(filepath.Join(b.prefix, dataset))
	}
	syncAll()
	cpu0 := procCPU(b.cmd.Process.Pid)
	t0 := time.Now()
	args := []string{"flush", "--wait"}
	if force {
		args = append(args, "--force")
	}
	b.cli(append(args, dataset)...)
	return sample{time.Since(t0).Seconds(), procCPU(b.cmd.Process.Pid) - cpu0}
}

// fetchOnce times a restart with the cache gone, which brings the dataset
// back. The time is the whole restart (daemon start and mount included,
// some 0.1 s), so the ratio errs against scrfs.
func (b *bench) fetchOnce() sample {
	b.stop()
	os.RemoveAll(filepath.Join(b.work, "cache"))
	os.RemoveAll(filepath.Join(b.work, "control"))
	syncAll()
	t2 := time.Now()
	b.start()
	wall := time.Since(t2).Seconds()
	if !strings.Contains(b.fetched, "dataset="+dataset) {
		die("%s: the restart did not fetch the dataset", b.label)
	}
	return sample{wall, procCPU(b.cmd.Process.Pid)}
}

// runTimed runs a command and returns its wall and CPU time.
func runTimed(name string, args ...string) sample { return timed(exec.Command(name, args...)) }

// timed runs cmd and returns its wall and CPU time.
func timed(cmd *exec.Cmd) sample {
	cmd.Stderr = os.Stderr
	t := time.Now()
	check(cmd.Run())
	wall := time.Since(t).Seconds()
	st := cmd.ProcessState
	return sample{wall, (st.UserTime() + st.SystemTime()).Seconds()}
}

// procCPU returns the user+system CPU seconds of a running process.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	check(err)
	// Fields after the command name (which may hold spaces) in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux
}

func syncAll() { syscall.Sync() }

// writeDataset writes size bytes through the mount: 3/4 in -large files,
// 1/4 in -small files, spread over subdirectories as ranks would.
func writeDataset(dir string, size int64) int {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*131 + i>>9)
	}
	n := 0
	bigSize := size * 3 / 4 / int64(*large)
	for i := range *large {
		writeFile(filepath.Join(dir, largeName(i)), bigSize, buf, i)
		n++
	}
	smallSize := size / 4 / int64(*small)
	for i := range *small {
		writeFile(filepath.Join(dir, fmt.Sprintf("rank_%03d", i%max(*large, 1)), fmt.Sprintf("shard_%05d.bin", i)), smallSize, buf, i)
		n++
	}
	return n
}

// largeName is the path of large file i inside the dataset.
func largeName(i int) string { return filepath.Join(fmt.Sprintf("rank_%03d", i), "model.bin") }

func writeFile(p string, size int64, buf []byte, seed int) {
	check(os.MkdirAll(filepath.Dir(p), 0o755))
	f, err := os.Create(p)
	check(err)
	buf[0], buf[1] = byte(seed), byte(seed>>8) // distinct files
	for left := size; left > 0; {
		k := min(left, int64(len(buf)))
		_, err := f.Write(buf[:k])
		check(err)
		left -= k
	}
	check(f.Close())
}

// median returns the median wall (or CPU) seconds of operation k.
func median(res map[string][]sample, k string, cpu bool) float64 {
	var v []float64
	for _, s := range res[k] {
		if cpu {
			v = append(v, s.cpu)
		} else {
			v = append(v, s.wall)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// table prints each operation's median wall time, rate, CPU time and CPU
// time per GiB moved.
func table(res map[string][]sample, size int64, ops []string) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "operation\twall s\tMiB/s\tCPU s\tCPU s/GiB")
	for _, k := range ops {
		w, c := median(res, k, false), median(res, k, true)
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t%.2f\t%.2f\n", k, w, float64(size)/(1<<20)/w, c, c/(float64(size)/(1<<30)))
	}
	tw.Flush()
}

// reportAB prints both sides of an A/B run and the median of the
// per-round ratios B ÷ A.
func reportAB(res map[string][]sample, size int64) {
	fmt.Printf("\nmedians of %d rounds (%s); A = %s, B = this tree:\n", *rounds, human(size), *abBin)
	table(res, size, []string{"A flush", "B flush", "A fetch", "B fetch"})
	for _, op := range []string{"flush", "fetch"} {
		var r []float64
		for i := range res["A "+op] {
			r = append(r, res["B "+op][i].wall/res["A "+op][i].wall)
		}
		slices.Sort(r)
		fmt.Printf("%s time B ÷ A: median %.3f of %d rounds [%.3f–%.3f]\n", op, r[len(r)/2], len(r), r[0], r[len(r)-1])
	}
}

func report(res map[string][]sample, size int64) {
	med := func(k string, cpu bool) float64 { return median(res, k, cpu) }
	fmt.Printf("\nmedians of %d rounds (%s):\n", *rounds, human(size))
	table(res, size, []string{"flush", "cp", "cp+sync", "fetch", "cp back"})
	fmt.Printf("\nratios (cp time ÷ scrfs time; > 1.0: scrfs faster):\n")
	fmt.Printf("  flush vs cp -r         %.2f\n", med("cp", false)/med("flush", false))
	fmt.Printf("  flush vs cp -r + sync  %.2f\n", med("cp+sync", false)/med("flush", false))
	fmt.Printf("  fetch vs cp -r back    %.2f\n", med("cp back", false)/med("fetch", false))
	fmt.Printf("CPU (scrfs CPU ÷ cp CPU): flush %.2f, fetch %.2f\n",
		med("flush", true)/med("cp", true), med("fetch", true)/med("cp back", true))
	if *restart {
		fmt.Printf("\nthe restart as the application sees it (from the daemon's start; page cache dropped):\n")
		table(res, size, []string{"restart first byte", "restart read all", "cp back+read"})
		fmt.Printf("  read all ÷ (cp -r back + read)  %.2f  (issue 25: ≤ 0.8)\n", med("restart read all", false)/med("cp back+read", false))
		fmt.Printf("  first byte                      %.2f s  (issue 25: ≤ 0.5 s)\n", med("restart first byte", false))
	}
}

// warnIfTmpfs says so when the "disk" is memory: the comparison would then
// measure memory copies, not the disk.
func warnIfTmpfs(dir string) {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil && st.Type == 0x01021994 {
		fmt.Fprintf(os.Stderr, "warning: %s is tmpfs; use -disk on a real disk\n", dir)
	}
}

func user() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
}

func human(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

func sortedKeys(m map[string]sample) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func check(err error) {
	if err != nil && err != io.EOF {
		die("%v", err)
	}
}

// cleanups run before the program ends, also on errors, so a failed run
// leaves no daemon, mount or gigabytes of test data behind.
var cleanups []func()

func cleanup() {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanups = nil
}

func die(format string, args ...any) {
	cleanup()
	log.Fatalf(format, args...)
}

func parseSize(s string) (int64, error) {
	units := map[string]int64{"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	u, ok := units[s[i:]]
	if err != nil || !ok {
		return 0, fmt.Errorf("size %q: want e.g. 4GiB", s)
	}
	return n * u, nil
}
