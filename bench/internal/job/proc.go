package job

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100
// on every Linux architecture scrfs runs on (getconf CLK_TCK).
const clockTick = 10 * time.Millisecond

// Usage is what a process consumed so far.
type Usage struct {
	CPU    time.Duration // user + system
	Faults int64         // minor + major page faults
}

// Sub returns u − v.
func (u Usage) Sub(v Usage) Usage { return Usage{u.CPU - v.CPU, u.Faults - v.Faults} }

// ReportedKiB is how much memory the guest has handed back to its host so
// far (virtio free page reporting), where the kernel exposes it, else 0.
// Touching such memory again costs the host a fault per page, so a
// measurement during which this grew paid for it (bench/README.md).
func ReportedKiB() int64 {
	b, err := os.ReadFile("/sys/module/page_reporting/parameters/reported_kib")
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// Usage returns what node n's daemon consumed so far.
func (n *Node) Usage() (Usage, error) {
	pid, err := n.Pid()
	if err != nil {
		return Usage{}, err
	}
	return ProcessUsage(strconv.Itoa(pid))
}

// ProcessUsage returns what process pid ("self" for this one) consumed so
// far.
func ProcessUsage(pid string) (Usage, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return Usage{}, err
	}
	return ParseStat(string(b))
}

// BusyCPU returns the CPU time every process on the machine used so far
// (user, nice, system, irq and softirq time of /proc/stat): what others
// used during a measurement is its difference less one's own.
func BusyCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	var busy int64
	for i, v := range f[1:8] {
		if i == 3 || i == 4 {
			continue // idle, iowait
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/stat line %q", line)
		}
		busy += n
	}
	return time.Duration(busy) * clockTick, nil
}

// Usage returns what all daemons consumed so far.
func (c *Cluster) Usage() (Usage, error) {
	var sum Usage
	for _, n := range c.Nodes {
		u, err := n.Usage()
		if err != nil {
			return Usage{}, err
		}
		sum.CPU += u.CPU
		sum.Faults += u.Faults
	}
	return sum, nil
}

// PeakRSS returns node n's VmHWM in bytes, the process's peak resident set.
func (n *Node) PeakRSS() (int64, error) {
	pid, err := n.Pid()
	if err != nil {
		return 0, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return ParseKB(v)
		}
	}
	return 0, fmt.Errorf("node %d: no VmHWM in /proc status", n.Index)
}

// ParseStat reads a /proc/PID/stat line. The command name (field 2) is in
// parentheses and may hold spaces, so fields are counted from the last ')':
// minflt and majflt are fields 10 and 12, utime and stime 14 and 15.
func ParseStat(stat string) (Usage, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("unexpected /proc stat %.40q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("unexpected /proc stat %.40q", stat)
	}
	num := func(k int) (int64, error) {
		v, err := strconv.ParseInt(f[k-3], 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("unexpected /proc stat field %d %q", k, f[k-3])
		}
		return v, nil
	}
	var vals [4]int64
	for j, k := range []int{10, 12, 14, 15} {
		v, err := num(k)
		if err != nil {
			return Usage{}, err
		}
		vals[j] = v
	}
	return Usage{CPU: time.Duration(vals[2]+vals[3]) * clockTick, Faults: vals[0] + vals[1]}, nil
}

// ParseKB parses the value of a /proc/PID/status memory line ("  1234 kB").
func ParseKB(v string) (int64, error) {
	f := strings.Fields(v)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("unexpected /proc status value %q", v)
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || kb < 0 {
		return 0, fmt.Errorf("unexpected /proc status value %q", v)
	}
	return kb << 10, nil
}

// Mounted reports whether a file system is mounted at dir.
func Mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	return err == nil && strings.Contains(string(b), " "+dir+" ")
}
