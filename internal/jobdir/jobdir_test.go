package jobdir

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// otherUID is a uid that is not ours, for ownership cases (root only).
const otherUID = 65534

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user")
	}
}

func mustUnsafe(t *testing.T, err error, says string) {
	t.Helper()
	if !errors.Is(err, ErrUnsafe) {
		t.Fatalf("got %v, want an unsafe-directory error saying %q", err, says)
	}
	if !strings.Contains(err.Error(), says) {
		t.Fatalf("error %q does not say %q", err, says)
	}
}

func TestCreateMakesPrivateDirs(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base")
	d, err := Create(base, "me", "scrfs.job")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, p := range []string{filepath.Join(base, "me"), d.Path()} {
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want a directory of mode 0700", p, fi, err)
		}
	}
	again, err := Open(base, "me", "scrfs.job")
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if _, err := Open(base, "me", "scrfs.other"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open of a missing directory: %v, want not-exist", err)
	}
}

func TestRefusesUnsafeDirectories(t *testing.T) {
	cases := []struct {
		name  string
		root  bool
		setup func(t *testing.T, base string)
		says  string
	}{
		{name: "user directory of another user", root: true, setup: func(t *testing.T, base string) {
			mkdir(t, filepath.Join(base, "me"), 0o700)
			chown(t, filepath.Join(base, "me"), otherUID)
		}, says: "belongs to uid 65534"},
		{name: "job directory of another user", root: true, setup: func(t *testing.T, base string) {
			mkdir(t, filepath.Join(base, "me", "scrfs.job"), 0o700)
			chown(t, filepath.Join(base, "me", "scrfs.job"), otherUID)
		}, says: "not to uid"},
		{name: "group-writable user directory", setup: func(t *testing.T, base string) {
			mkdir(t, filepath.Join(base, "me"), 0o770)
		}, says: "chmod go-w"},
		{name: "world-writable job directory", setup: func(t *testing.T, base string) {
			mkdir(t, filepath.Join(base, "me", "scrfs.job"), 0o777)
		}, says: "mode 0777"},
		{name: "user directory is a link", setup: func(t *testing.T, base string) {
			mkdir(t, filepath.Join(base, "elsewhere"), 0o700)
			symlink(t, filepath.Join(base, "elsewhere"), filepath.Join(base, "me"))
		}, says: "symbolic link"},
		{name: "job directory is a link", setup: func(t *testing.T, base string) {
			mkdir(t, filepath.Join(base, "me", "real"), 0o700)
			symlink(t, "real", filepath.Join(base, "me", "scrfs.job"))
		}, says: "symbolic link"},
		{name: "base writable by all without sticky bit", setup: func(t *testing.T, base string) {
			chmod(t, base, 0o777)
		}, says: "chmod +t"},
		{name: "base of another user", root: true, setup: func(t *testing.T, base string) {
			chown(t, base, otherUID)
		}, says: "neither root nor you"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				requireRoot(t)
			}
			base := filepath.Join(t.TempDir(), "base")
			mkdir(t, base, 0o755)
			tc.setup(t, base)
			for _, open := range []func(string, ...string) (*Dir, error){Create, Open} {
				d, err := open(base, "me", "scrfs.job")
				if err == nil {
					d.Close()
				}
				mustUnsafe(t, err, tc.says)
			}
		})
	}
	t.Run("sticky world-writable base", func(t *testing.T) {
		base := filepath.Join(t.TempDir(), "shm")
		mkdir(t, base, 0o755)
		chmod(t, base, 0o777|os.ModeSticky)
		d, err := Create(base, "me", "scrfs.job")
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
	})
}

// Files are never opened, created or truncated through a link, with
// openat2 and with the fallback walk alike.
func TestOpenFileNeverFollowsLinks(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "openat walk"}[fallback], func(t *testing.T) {
			was := noOpenat2.Load()
			noOpenat2.Store(fallback)
			t.Cleanup(func() { noOpenat2.Store(was) })
			d, err := Create(filepath.Join(t.TempDir(), "base"), "me", "scrfs.job")
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
			symlink(t, victim, d.Join("lock"))
			mkdir(t, d.Join("sub"), 0o700)
			symlink(t, filepath.Dir(victim), d.Join("sub/up"))
			for _, name := range []string{"lock", "sub/up/victim"} {
				f, err := d.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
				if err == nil {
					f.Close()
				}
				mustUnsafe(t, err, "symbolic link")
				if _, err := d.ReadFile(name, 1<<20); !errors.Is(err, ErrUnsafe) {
					t.Errorf("ReadFile(%s): %v, want unsafe", name, err)
				}
			}
			if b, _ := os.ReadFile(victim); string(b) != "precious" {
				t.Fatalf("victim file changed to %q", b)
			}
			for _, bad := range []string{"../x", "/etc/passwd", "", "a//b", "."} {
				if _, err := d.OpenFile(bad, os.O_RDONLY, 0); err == nil {
					t.Errorf("OpenFile(%q) succeeded", bad)
				}
			}
			f, err := d.OpenFile("sub/ok", os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		})
	}
}

func TestReadFileRefusesOddFiles(t *testing.T) {
	d, err := Create(filepath.Join(t.TempDir(), "base"), "me")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := syscall.Mkfifo(d.Join("fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadFile("fifo", 10); !errors.Is(err, ErrUnsafe) {
		t.Errorf("ReadFile of a FIFO: %v, want unsafe (and no hang)", err)
	}
	if err := os.WriteFile(d.Join("big"), make([]byte, 11), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadFile("big", 10); err == nil || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Errorf("ReadFile of a file over the limit: %v", err)
	}
}

func TestWriteFileAtomicAndSocket(t *testing.T) {
	d, err := Create(filepath.Join(t.TempDir(), "base"), "me")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, content := range []string{"one", "two"} {
		if err := d.WriteFileAtomic("state.json", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := d.ReadFile("state.json", 100)
		if err != nil || string(b) != content {
			t.Fatalf("read back %q, %v; want %q", b, err, content)
		}
	}
	entries, _ := os.ReadDir(d.Path())
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	sock, err := d.SocketPath("control.sock")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if fi, err := os.Lstat(d.Join("control.sock")); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket not in the directory: %v %v", fi, err)
	}
	c, err := net.Dial("unix", d.Join("control.sock"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func mkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, p, mode)
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, p string, uid int) {
	t.Helper()
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
