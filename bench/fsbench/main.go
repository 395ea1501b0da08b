// Command fsbench measures scrfs's file data path side by side, in one run,
// with writing to the cache directory directly and with go-fuse's own
// loopback file system on the same device, each with and without FUSE
// passthrough. It prints medians over several rounds (after an untimed
// warm-up round) and the ratios the project's targets are stated in.
//
//	go run ./bench/fsbench [-dir /dev/shm] [-size 1GiB] [-writers 4] [-files 10000] [-tar 5000] [-rounds 3]
//
// Workloads: (a) W writers × SIZE sequential, 1 MiB writes, fsync;
// (b) reading the same back with 1 MiB reads; (c) FILES × 4 KiB files
// created, written and closed by one thread; (d) tar(1) extracting an
// archive of TAR × 4 KiB files in directories of 100.
package main

import (
	"archive/tar"
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

	"github.com/scrfs/scrfs/bench/internal/job"
)

var (
	baseDir = flag.String("dir", "/dev/shm", "directory on the device under test (cache, loopback original, direct)")
	sizeArg = flag.String("size", "1GiB", "bytes per writer in (a) and (b)")
	writers = flag.Int("writers", 4, "parallel writers in (a) and readers in (b)")
	files   = flag.Int("files", 10000, "small files in (c)")
	tarN    = flag.Int("tar", 5000, "files in (d)'s archive")
	wls     = flag.String("workloads", "write,read,small,tar,rtt", "comma-separated workloads to run: write (a), read (b, needs write), small (c), tar (d), rtt (e)")
	rounds  = flag.Int("rounds", 3, "measured rounds (after one untimed warm-up)")
	only    = flag.String("only", "", "comma-separated targets to run (default all)")
	base    = flag.String("base", "", "another scrfs binary (an older build, say) to measure as targets scrfs-base and scrfs-base-daemon, interleaved with the others")
)

// target is one way of reaching the device.
type target struct {
	name  string
	setup func(work string) (mounted, error)
}

func main() {
	flag.Parse()
	size, err := parseSize(*sizeArg)
	if err != nil {
		log.Fatal(err)
	}
	work, err := os.MkdirTemp(*baseDir, "fsbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	bins := buildHelpers(work)

	targets := []target{
		{"direct", func(w string) (mounted, error) {
			d := filepath.Join(w, "direct")
			return mounted{dir: d, stop: func() {}}, os.MkdirAll(d, 0o755)
		}},
		{"scrfs", scrfsTarget(bins["scrfs"], "auto")},
		{"scrfs-daemon", scrfsTarget(bins["scrfs"], "off")},
		{"loopback", loopbackTarget(bins, true)},
		{"loopback-daemon", loopbackTarget(bins, false)},
	}
	if *base != "" {
		targets = append(targets, target{"scrfs-base", scrfsTarget(*base, "auto")}, target{"scrfs-base-daemon", scrfsTarget(*base, "off")})
	}
	if *only != "" {
		targets = slices.DeleteFunc(targets, func(t target) bool { return !slices.Contains(strings.Split(*only, ","), t.name) })
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 3)
	}
	if run("tar") {
		if _, err := exec.LookPath("tar"); err != nil {
			log.Fatal("workload tar needs tar(1) (Debian: apt-get install tar), or leave it out of -workloads")
		}
		archive = filepath.Join(work, "tree.tar")
		check(writeArchive(archive, *tarN, buf[:4096]))
	}
	results := measureAll(targets, work, size, buf)
	report(targets, results, size)
}

// run reports whether workload name is in -workloads.
func run(name string) bool { return slices.Contains(strings.Split(*wls, ","), name) }

// archive is (d)'s tar file, on the device under test.
var archive string

// measureAll mounts every target, then runs the rounds round-robin over the
// targets (round 0 is an untimed warm-up), so slow drifts of this shared
// machine hit every target alike; it returns each workload's median per
// target.
func measureAll(targets []target, work string, size int64, buf []byte) map[string]map[string]float64 {
	mounts := make([]mounted, len(targets))
	for i, tg := range targets {
		m, err := tg.setup(filepath.Join(work, tg.name+"-work"))
		if err != nil {
			log.Fatalf("%s: %v", tg.name, err)
		}
		defer m.stop()
		mounts[i] = m
	}
	samples := map[string]map[string][]float64{}
	for r := 0; r <= *rounds; r++ {
		for i, tg := range targets {
			s := measureRound(tg.name, mounts[i], r, size, buf)
			if r == 0 {
				continue // warm-up: first touch of memory, caches, goroutines
			}
			if samples[tg.name] == nil {
				samples[tg.name] = map[string][]float64{}
			}
			for k, v := range s {
				samples[tg.name][k] = append(samples[tg.name][k], v)
			}
		}
	}
	out := map[string]map[string]float64{}
	for _, tg := range targets {
		out[tg.name] = map[string]float64{}
		for k, v := range samples[tg.name] {
			out[tg.name][k] = median(v)
		}
		line := fmt.Sprintf("%-16s", tg.name)
		for _, k := range []string{"write", "read", "small", "tar"} {
			if v, ok := out[tg.name][k]; ok && (k == "write" || k == "read") {
				line += fmt.Sprintf("  %s %6.2f GiB/s", k, v/(1<<30))
			} else if ok {
				line += fmt.Sprintf("  %s %8.0f files/s", k, v)
			}
		}
		fmt.Fprintln(os.Stderr, line)
	}
	return out
}

// measureRound runs the workloads once on one target.
func measureRound(name string, m mounted, r int, size int64, buf []byte) map[string]float64 {
	ds := filepath.Join(m.dir, fmt.Sprintf("round%d", r))
	if err := os.Mkdir(ds, 0o755); err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	out := map[string]float64{}
	total := float64(size) * float64(*writers)
	if run("write") {
		u0, took0 := usage(m.pid), job.ReportedKiB()
		write := timeIt(func() {
			parallel(*writers, func(i int) { writeFile(filepath.Join(ds, fmt.Sprint("w", i)), size, buf) })
		})
		out["write"] = total / write.Seconds()
		// Where (a)'s time went, to tell what the mount costs from what
		// the machine did meanwhile (bench/README.md): the writers' CPU
		// time per GiB, the daemon's, everything else's, and the memory
		// the host took back.
		u := usage(m.pid).sub(u0)
		gib := total / (1 << 30)
		out["writecpu"] = u.self.Seconds() / gib
		out["daemoncpu"] = u.daemon.Seconds() / gib
		out["otherscpu"] = u.others.Seconds()
		out["took"] = float64(job.ReportedKiB()-took0) / 1024
	}
	if run("read") && run("write") {
		// As root, the page cache goes, so reads through FUSE are not
		// served from pages the writes left behind (tmpfs data stays put).
		job.DropPageCache()
		read := timeIt(func() { parallel(*writers, func(i int) { readFile(filepath.Join(ds, fmt.Sprint("w", i)), buf) }) })
		out["read"] = total / read.Seconds()
	}
	if run("small") {
		small := timeIt(func() { smallFiles(filepath.Join(ds, "small"), *files, buf[:4096]) })
		out["small"] = float64(*files) / small.Seconds()
	}
	if run("tar") {
		dest := filepath.Join(ds, "tar")
		check(os.Mkdir(dest, 0o755))
		t := timeIt(func() {
			if out, err := exec.Command("tar", "-xf", archive, "-C", dest).CombinedOutput(); err != nil {
				log.Fatalf("%s: tar: %v\n%s", name, err, out)
			}
		})
		out["tar"] = float64(*tarN) / t.Seconds()
	}
	if run("rtt") {
		out["rtt"] = statfsMicros(ds, 20000)
	}
	if err := os.RemoveAll(ds); err != nil {
		log.Fatalf("%s: clean up: %v", name, err)
	}
	return out
}

// statfsMicros returns the mean time of n statfs calls on p in µs: through
// a FUSE mount, one request's round trip through the kernel and the daemon
// (which makes one statfs of its own), the floor under every request a
// small file costs.
func statfsMicros(p string, n int) float64 {
	var st syscall.Statfs_t
	t := timeIt(func() {
		for range n {
			check(syscall.Statfs(p, &st))
		}
	})
	return float64(t.Microseconds()) / float64(n)
}

func report(targets []target, res map[string]map[string]float64, size int64) {
	fmt.Printf("\nscrfs file data path, %d writers × %s, %d × 4 KiB files, tar of %d × 4 KiB files; median of %d rounds (targets taken in turn within each round) after a warm-up; device: %s\n\n",
		*writers, *sizeArg, *files, *tarN, *rounds, *baseDir)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "workload\t")
	for _, t := range targets {
		fmt.Fprintf(tw, "%s\t", t.name)
	}
	fmt.Fprintln(tw)
	rows := []struct{ key, label, unit string }{
		{"write", fmt.Sprintf("(a) write %d×%s + fsync", *writers, *sizeArg), "GiB/s"},
		{"read", "(b) read back", "GiB/s"},
		{"small", fmt.Sprintf("(c) %d × 4 KiB create", *files), "files/s"},
		{"tar", fmt.Sprintf("(d) tar -x of %d files", *tarN), "files/s"},
		{"rtt", "(e) one request: statfs", "µs"},
		{"writecpu", "(a) writers' CPU", "s/GiB"},
		{"daemoncpu", "(a) daemon's CPU", "s/GiB"},
		{"otherscpu", "(a) other processes' CPU", "s"},
		{"took", "(a) host took back", "MiB"},
	}
	rows = slices.DeleteFunc(rows, func(r struct{ key, label, unit string }) bool {
		for _, t := range targets {
			if _, ok := res[t.name][r.key]; ok {
				return false
			}
		}
		return true
	})
	for _, r := range rows {
		fmt.Fprintf(tw, "%s [%s]\t", r.label, r.unit)
		for _, t := range targets {
			v := res[t.name][r.key]
			if r.unit == "GiB/s" {
				v /= 1 << 30
			}
			fmt.Fprintf(tw, "%.2f\t", v)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Println("\nratios (higher is better for scrfs):")
	pairs := [][2]string{{"scrfs", "direct"}, {"scrfs-daemon", "direct"}, {"scrfs", "loopback"}, {"scrfs-daemon", "loopback-daemon"},
		{"scrfs", "scrfs-base"}, {"scrfs-daemon", "scrfs-base-daemon"}}
	for _, r := range rows {
		if r.unit != "GiB/s" && r.unit != "files/s" {
			continue // not a rate: see the table
		}
		for _, p := range pairs {
			a, b := res[p[0]][r.key], res[p[1]][r.key]
			if a == 0 || b == 0 {
				continue
			}
			fmt.Printf("  %-28s %-16s ÷ %-16s = %.2f\n", r.label, p[0], p[1], a/b)
		}
	}
}

// writeFile writes a checkpoint file as applications do (torch.save,
// numpy.save, fopen "w" and the stall benchmark alike): opened write-only,
// not read-write as os.Create would.
func writeFile(p string, size int64, buf []byte) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	check(err)
	for left := size; left > 0; left -= int64(len(buf)) {
		_, err := f.Write(buf[:min(left, int64(len(buf)))])
		check(err)
	}
	check(f.Sync())
	check(f.Close())
}

func readFile(p string, buf []byte) {
	f, err := os.Open(p)
	check(err)
	for {
		_, err := f.Read(buf)
		if err == io.EOF {
			break
		}
		check(err)
	}
	check(f.Close())
}

// writeArchive writes a tar archive of n files of data, 100 to a directory,
// as (d) extracts it.
func writeArchive(p string, n int, data []byte) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	now := time.Now().Truncate(time.Second)
	for i := range n {
		if i%100 == 0 {
			hdr := &tar.Header{Typeflag: tar.TypeDir, Name: fmt.Sprintf("d%d/", i/100), Mode: 0o755, ModTime: now}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("d%d/f%d", i/100, i), Mode: 0o644, Size: int64(len(data)), ModTime: now}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// cpu is CPU time used so far: by this process (the writers), by a
// target's daemon, and by every other process on the machine.
type cpu struct{ self, daemon, others time.Duration }

func (c cpu) sub(d cpu) cpu { return cpu{c.self - d.self, c.daemon - d.daemon, c.others - d.others} }

// usage reads the CPU time used so far, with daemon pid (0: none).
func usage(pid int) cpu {
	var c cpu
	if u, err := job.ProcessUsage("self"); err == nil {
		c.self = u.CPU
	}
	if pid != 0 {
		if u, err := job.ProcessUsage(strconv.Itoa(pid)); err == nil {
			c.daemon = u.CPU
		}
	}
	busy, _ := job.BusyCPU()
	c.others = busy - c.self - c.daemon
	return c
}

func smallFiles(dir string, n int, data []byte) {
	check(os.Mkdir(dir, 0o755))
	for i := 0; i < n; i++ {
		fd, err := syscall.Open(filepath.Join(dir, fmt.Sprint("f", i)), syscall.O_CREAT|syscall.O_WRONLY|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
		check(err)
		_, err = syscall.Write(fd, data)
		check(err)
		check(syscall.Close(fd))
	}
}

func parallel(n int, f func(i int)) {
	done := make(chan struct{})
	for i := 0; i < n; i++ {
		go func() { f(i); done <- struct{}{} }()
	}
	for i := 0; i < n; i++ {
		<-done
	}
}

func timeIt(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// buildHelpers builds scrfs and the loopback mounter into work.
func buildHelpers(work string) map[string]string {
	bins := map[string]string{"scrfs": filepath.Join(work, "scrfs"), "loopback": filepath.Join(work, "loopback")}
	for name, pkg := range map[string]string{"scrfs": "./cmd/scrfs", "loopback": "./bench/loopback"} {
		out, err := exec.Command("go", "build", "-o", bins[name], pkg).CombinedOutput()
		if err != nil {
			log.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	return bins
}

// scrfsTarget mounts the scrfs binary bin with fuse.passthrough set so.
func scrfsTarget(bin string, passthrough string) func(string) (mounted, error) {
	return func(w string) (mounted, error) {
		mnt := filepath.Join(w, "mnt")
		cmd := exec.Command(bin, "mount", mnt)
		cmd.Env = append(os.Environ(),
			"SCRFS_PATHS_CACHE_BASE="+filepath.Join(w, "cache"),
			"SCRFS_PATHS_CONTROL_BASE="+filepath.Join(w, "control"),
			"SCRFS_JOB_ID=bench", "SCRFS_METRICS_LISTEN=", "SCRFS_DATASETS_COMPLETE=",
			"SCRFS_FUSE_PASSTHROUGH="+passthrough)
		return startAndWait(mnt, cmd, "scrfs ready", "data_path="), nil
	}
}

func loopbackTarget(bins map[string]string, passthrough bool) func(string) (mounted, error) {
	return func(w string) (mounted, error) {
		orig, mnt := filepath.Join(w, "orig"), filepath.Join(w, "mnt")
		check(os.MkdirAll(orig, 0o755))
		check(os.MkdirAll(mnt, 0o755))
		cmd := exec.Command(bins["loopback"], fmt.Sprintf("-passthrough=%v", passthrough), orig, mnt)
		return startAndWait(mnt, cmd, "ready", ""), nil
	}
}

// mounted is a target ready to be written: its directory, how to stop it,
// and its daemon's pid (0 for direct).
type mounted struct {
	dir  string
	stop func()
	pid  int
}

// startAndWait starts a mount daemon serving mnt and waits for its ready
// line on stdout or stderr.
func startAndWait(mnt string, cmd *exec.Cmd, ready, show string) mounted {
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	check(cmd.Start())
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, ready) {
			if show != "" {
				if i := strings.Index(line, show); i >= 0 {
					fmt.Fprintf(os.Stderr, "  %s: %s\n", filepath.Base(cmd.Path), strings.Fields(line[i:])[0])
				}
			}
			break
		}
	}
	go io.Copy(io.Discard, r)
	return mounted{dir: mnt, pid: cmd.Process.Pid, stop: func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		w.Close()
	}}
}

func parseSize(s string) (int64, error) {
	units := map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "": 1}
	for suffix, mult := range units {
		if suffix != "" && strings.HasSuffix(s, suffix) {
			var n int64
			_, err := fmt.Sscan(strings.TrimSuffix(s, suffix), &n)
			return n * mult, err
		}
	}
	var n int64
	_, err := fmt.Sscan(s, &n)
	return n, err
}
