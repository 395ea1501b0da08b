package mount

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Tree is the go-fuse node tree a mount serves; scrfs's is *fs.FS. The
// mount reads its root and options once, and tells it what only a served
// mount knows.
type Tree interface {
	// Root returns the node shown at the mountpoint.
	Root() gofs.InodeEmbedder
	// NodeOptions returns the tree's go-fuse options; the mount fills in
	// their MountOptions.
	NodeOptions() *gofs.Options
	// Mounted hands the tree the server that now serves it, as soon as
	// the kernel has answered INIT, so that it may notify the kernel.
	Mounted(server *fuse.Server)
	// SetPassthrough says whether opens may hand the kernel a backing
	// file (FUSE passthrough): false before the mount, then what the
	// kernel and this process's privileges allow.
	SetPassthrough(on bool)
}

// Options configure how a Tree is mounted.
type Options struct {
	// CacheDir is the directory the tree serves its files from (the
	// job's cache). It is the mount's source in the mount table, which df
	// shows and by which a later start recognises a mount of the same
	// cache whose daemon was killed (prepareMountpoint, RecoverKilled);
	// the passthrough probe file is made there.
	CacheDir string
	// MaxWrite is the largest WRITE the kernel sends (go-fuse allows 1 MiB):
	// fewer, larger requests on the daemon data path.
	MaxWrite   int
	AllowOther bool
	Debug      bool // log every FUSE request
	// Passthrough is "auto" (use it when the kernel and privileges allow),
	// "on" (fail the mount without it) or "off".
	Passthrough string
	// Method is "auto" (direct mount(2) as root, fusermount3 otherwise),
	// "direct" or "fusermount".
	Method string
	// Guard are the arguments that make this program (os.Executable) run
	// as the mount's guard, before the daemon's pid and the connection
	// (cmd/scrfs: "mount-guard"; see guard.go). Nil starts no guard: a
	// test binary, say, has no such command.
	Guard []string
	// Logger gets what the mount did and go-fuse's warnings; nil: none.
	Logger *slog.Logger
	// TrustMountpoint accepts a mountpoint that is a symbolic link or a
	// directory another user owns; otherwise both are refused, for root
	// too: in a shared directory like /tmp another user could have made
	// them to redirect the application's writes, or the unmount.
	TrustMountpoint bool
}

// Mount is a mounted Tree.
type Mount struct {
	dir         string
	server      *fuse.Server
	passthrough bool
	log         *slog.Logger
	// parent is the mountpoint's parent directory, held (O_PATH) from
	// before the mount: root unmounts the name in it without following a
	// link, so that what goes is the mount this process made, never what
	// the path points to by then. (A descriptor inside the mount would
	// keep it busy.)
	parent *os.File
}

// New mounts tree on dir and serves it until Unmount. A stale mount left
// at dir by a daemon that crashed is detected and replaced; a live one is an
// error. dir is created if it does not exist.
func New(dir string, tree Tree, o Options) (*Mount, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	if err := prepareMountpoint(dir, o.CacheDir, log); err != nil {
		return nil, err
	}
	if !o.TrustMountpoint {
		if err := checkMountpoint(dir); err != nil {
			return nil, err
		}
	}
	var parent *os.File
	if fd, err := unix.Open(filepath.Dir(dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		parent = os.NewFile(uintptr(fd), filepath.Dir(dir))
	}
	direct := o.Method == "direct" || (o.Method != "fusermount" && os.Geteuid() == 0)
	if !direct {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			return nil, fmt.Errorf("mount %s: fusermount3 not found: a non-root user needs it to mount FUSE file systems (Debian/Ubuntu: apt-get install fuse3)", dir)
		}
		// fusermount3 opens /dev/fuse as the calling user.
		if err := syscall.Access("/dev/fuse", 6 /* R_OK|W_OK */); err != nil {
			return nil, fmt.Errorf("mount %s: cannot open /dev/fuse as this user (%v): it must be mode 0666, the default of the fuse3 package; ask the administrator", dir, err)
		}
	}
	// Without allow_other only the mounting user reaches the mount, and the
	// daemon runs as that user: the cache file system checks permissions on
	// the daemon's own syscalls, so the kernel need not check them again.
	// It would cost a round trip per create: every create invalidates the
	// parent's attributes, which default_permissions then has to re-fetch.
	var mountOpts []string
	if o.AllowOther {
		mountOpts = append(mountOpts, "allow_other", "default_permissions")
	}
	opts := tree.NodeOptions()
	opts.MountOptions = fuse.MountOptions{
		FsName:        o.CacheDir,
		Name:          "scrfs",
		MaxWrite:      o.MaxWrite,
		MaxReadAhead:  o.MaxWrite,
		MaxBackground: 64, // async releases and reads in flight at once
		// Files still being fetched from another node are opened for
		// direct I/O; this lets applications map them all the same.
		ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP,
		DisableXAttrs:     true,
		DirectMount:       direct,
		Options:           mountOpts,
		Debug:             o.Debug,
		Logger:            slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	tree.SetPassthrough(false) // decided below, once the kernel has answered INIT
	server, err := gofs.Mount(dir, tree.Root(), opts)
	if err != nil {
		if parent != nil {
			parent.Close()
		}
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	tree.Mounted(server)
	m := &Mount{dir: dir, server: server, log: log, parent: parent}
	if o.Passthrough != "off" {
		why := m.probePassthrough(o.CacheDir)
		if why != "" && o.Passthrough == "on" {
			m.Unmount()
			return nil, fmt.Errorf("mount %s: fuse.passthrough = \"on\" but %s", dir, why)
		}
		if why != "" {
			log.Info("FUSE passthrough unavailable; serving data through the daemon", "why", why)
		}
	}
	tree.SetPassthrough(m.passthrough)
	m.raiseReadahead(readaheadRequests * o.MaxWrite)
	if o.Guard == nil {
		return m, nil
	}
	if mi, ok := mountAt(dir); ok {
		if pid, err := startGuard(o.Guard, mi.conn); err != nil {
			log.Warn("no mount guard: a killed daemon held in the kernel stays until the next start frees it", "err", err)
		} else {
			log.Debug("mount guard started", "pid", pid, "connection", mi.conn)
		}
	}
	return m, nil
}

// readaheadRequests is how many requests of the largest size the kernel
// may read ahead of a reader at once: with one, each waits for the one
// before; with four, a checkpoint being fetched at a restart, read through
// the daemon, was read whole 25% sooner at 1 GiB per node and 12% at 256
// MiB (redbench's cold restart, 4 nodes, medians of 4 and 6 rounds).
const readaheadRequests = 4

// raiseReadahead lets the kernel read ahead up to n bytes on this mount,
// in requests of up to MaxWrite. The kernel caps a FUSE mount's readahead
// at its block device's default, 128 KiB, whatever the daemon offers in
// INIT, so a file read through the daemon (every read without
// passthrough) arrives in 128 KiB requests, each a round trip: eight per
// MiB instead of one. The setting lives in sysfs, writable by root only;
// without it reads still work, in smaller requests.
func (m *Mount) raiseReadahead(n int) {
	var st syscall.Stat_t
	if err := syscall.Stat(m.dir, &st); err != nil {
		return
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	if err := os.WriteFile(p, []byte(strconv.Itoa(n>>10)), 0); err != nil {
		m.log.Debug("FUSE readahead left at the kernel's default", "file", p, "err", err)
	}
}

// probePassthrough checks that the kernel offered passthrough and that this
// process may register backing files (CAP_SYS_ADMIN), with a probe file
// made in dir. It returns why not, or "" when passthrough is on.
func (m *Mount) probePassthrough(dir string) string {
	if m.server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return "the kernel does not offer it (needs Linux >= 6.9)"
	}
	probe, err := os.CreateTemp(dir, ".passthrough-probe-*")
	if err != nil {
		return "cannot create a probe file: " + err.Error()
	}
	defer os.Remove(probe.Name())
	defer probe.Close()
	id, errno := m.server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(probe.Fd())})
	if errno != 0 {
		return "registering a backing file failed (" + errno.Error() + "; it needs CAP_SYS_ADMIN)"
	}
	m.server.UnregisterBackingFd(id)
	m.passthrough = true
	return ""
}

// Passthrough reports whether reads and writes bypass the daemon.
func (m *Mount) Passthrough() bool { return m.passthrough }

// Dir returns the mountpoint.
func (m *Mount) Dir() string { return m.dir }

// Wait blocks until the file system is unmounted.
func (m *Mount) Wait() { m.server.Wait() }

// lazyWait bounds how long Unmount waits for the kernel to let go of a
// lazily detached mount; the daemon's exit then aborts the connection.
const lazyWait = 2 * time.Second

// Unmount unmounts the file system. When the mountpoint is busy (a shell
// inside it, a file still open) go-fuse retries for a while; then the mount
// is detached lazily, so it disappears from the namespace at once and the
// kernel lets go when its last user does. It reports which happened.
func (m *Mount) Unmount() error {
	if m.parent != nil {
		defer m.parent.Close()
	}
	err := m.unmount()
	if err == nil {
		return nil
	}
	m.log.Warn("mountpoint busy; detaching it lazily (processes using it keep it until they let go)",
		"mountpoint", m.dir, "err", strings.TrimSpace(err.Error()))
	if err := detach(m.target()); err != nil {
		return fmt.Errorf("unmount %s: %w", m.dir, err)
	}
	done := make(chan struct{})
	go func() { m.server.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(lazyWait):
	}
	return nil
}

// target is the path to unmount: as root, the mountpoint's name in its
// held parent through /proc/self/fd (unmounted with UMOUNT_NOFOLLOW), which
// names this very mount whatever became of the path above it; else the
// path, for fusermount3, which unmounts only this user's own FUSE mounts
// and never follows a link.
func (m *Mount) target() string {
	if os.Geteuid() == 0 && m.parent != nil {
		p := fmt.Sprintf("/proc/self/fd/%d", m.parent.Fd())
		if _, err := os.Stat(p); err == nil {
			return p + "/" + filepath.Base(m.dir)
		}
	}
	return m.dir
}

// unmount unmounts the mount, retrying a little while it is busy (a
// process may be closing its last file), and waits for go-fuse to stop
// serving it.
func (m *Mount) unmount() error {
	t := m.target()
	if t == m.dir {
		return m.server.Unmount()
	}
	var err error
	delay := time.Duration(0)
	for range 5 {
		if err = syscall.Unmount(t, unix.UMOUNT_NOFOLLOW); err != syscall.EBUSY {
			break
		}
		delay = 2*delay + 5*time.Millisecond
		time.Sleep(delay) // nothing tells when the kernel lets go of the last file
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", m.dir, err)
	}
	m.server.Wait()
	return nil
}

// checkMountpoint refuses a mountpoint that is a symbolic link or belongs
// to another user: the path the daemon mounts on and later unmounts must
// be the user's own directory.
func checkMountpoint(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	}
	euid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("mountpoint %s is a symbolic link: the application's files would land where it points, which another user may choose; "+
			"mount on the directory itself, or set fuse.trust_mountpoint = true", dir)
	case st.Uid != euid:
		return fmt.Errorf("mountpoint %s belongs to uid %d, not to uid %d who runs scrfs: its owner could swap it for a link; "+
			"mount on a directory of your own, or set fuse.trust_mountpoint = true", dir, st.Uid, euid)
	}
	return nil
}

// detach lazily unmounts dir: umount2(MNT_DETACH) as root, fusermount3 -uz
// otherwise.
func detach(dir string) error {
	if os.Geteuid() == 0 {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err == nil {
			return nil
		}
	}
	out, err := exec.Command("fusermount3", "-u", "-z", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("fusermount3 -u -z: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// prepareMountpoint makes dir usable as a mountpoint: created if missing, a
// stale FUSE mount (its daemon gone: ENOTCONN) detached, a live mount
// refused. A mount of this job's cache (source cacheDir) whose daemon does
// not answer is a killed daemon's held in the kernel (the caller holds the
// job's lock, so no live daemon serves it): its connection is aborted and
// it is detached. The mount table is read before dir is touched, since
// touching a mount nobody serves would hang.
func prepareMountpoint(dir, cacheDir string, log *slog.Logger) error {
	var err error
	if m, mounted := mountAt(dir); mounted && strings.HasPrefix(m.fstype, "fuse") {
		// stat may be answered from the kernel's attribute cache even when
		// the daemon is gone; statfs always asks the daemon.
		err = statfsWithin(dir, 5*time.Second)
		if err == nil {
			return fmt.Errorf("mountpoint %s is already mounted (%s) and its daemon is alive; unmount it first (fusermount3 -u %s)", dir, m.fstype, dir)
		}
		if errors.Is(err, errNoAnswer) && m.source == cacheDir {
			if aerr := abortConnection(m.conn); aerr != nil {
				return fmt.Errorf("mountpoint %s: %w; %w", dir, err, aerr)
			}
			log.Warn("aborted the FUSE connection of this job's mount, which no daemon answers", "mountpoint", dir, "connection", m.conn)
			err = syscall.ECONNABORTED
		}
	} else {
		_, err = os.Stat(dir)
	}
	switch {
	case errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED):
		if err := detach(dir); err != nil {
			return fmt.Errorf("mountpoint %s holds a stale FUSE mount that could not be removed: %w", dir, err)
		}
		log.Warn("replaced a stale mount left by a daemon that is gone", "mountpoint", dir)
		_, err = os.Stat(dir)
		if err != nil {
			return fmt.Errorf("mountpoint %s: %w", dir, err)
		}
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create mountpoint: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	}
	return nil
}

// statfsWithin runs statfs on dir, giving up after timeout: a daemon that is
// alive but hung must not hang the one starting.
func statfsWithin(dir string, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		var st syscall.Statfs_t
		done <- syscall.Statfs(dir, &st)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("mountpoint %s is mounted but %w", dir, errNoAnswer)
	}
}

// errNoAnswer is a mount whose daemon did not answer statfs in time.
var errNoAnswer = errors.New("its daemon does not answer")

// mountAt returns the mount exactly at dir, from /proc/self/mountinfo
// (the last one, which hides the others).
func mountAt(dir string) (mountInfo, bool) {
	ms := findMounts(func(m mountInfo) bool { return m.dir == dir })
	if len(ms) == 0 {
		return mountInfo{}, false
	}
	return ms[len(ms)-1], true
}

// unescapeMountinfo undoes the octal escapes (\040 for space) of mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
