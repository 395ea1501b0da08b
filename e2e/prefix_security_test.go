package e2e

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The four attacks of issue 27, each by a second local user (mallory)
// who can write where the daemon's user works: a shared, sticky scratch
// area as the prefix, a predictable mountpoint in one, a secret file of
// theirs. Each fails with an error that names the path, nothing outside
// the prefix changes, and none of the application's bytes land where
// mallory can read them.

// victimFile makes a file only its owner may read, outside the prefix,
// and returns a check that it is as it was.
func victimFile(t *testing.T, owner *account) (string, func()) {
	t.Helper()
	dir := sharedDir(t, false, owner)
	p := filepath.Join(dir, "precious")
	must(t, os.WriteFile(p, []byte("the daemon user's own file"), 0o600))
	if owner != nil {
		must(t, os.Chown(p, int(owner.uid), int(owner.gid)))
	}
	before, err := os.Lstat(p)
	must(t, err)
	return p, func() {
		t.Helper()
		after, err := os.Lstat(p)
		must(t, err)
		b, _ := os.ReadFile(p)
		if string(b) != "the daemon user's own file" || after.Mode() != before.Mode() ||
			after.Sys().(*syscall.Stat_t).Uid != before.Sys().(*syscall.Stat_t).Uid {
			t.Errorf("the file outside the prefix changed: %q, %v, uid %d", b, after.Mode(), after.Sys().(*syscall.Stat_t).Uid)
		}
	}
}

// noDataIn fails if any regular file below dir holds bytes the application
// wrote (sums: the dataset's, as the application sees it), empty ones
// aside.
func noDataIn(t *testing.T, dir string, sums map[string]string) {
	t.Helper()
	want := map[string]bool{}
	for _, s := range sums {
		want[s] = true
	}
	delete(want, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") // an empty file's: the index lock's too
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if s, err := sumFile(p); err == nil && want[s] {
				t.Errorf("the application's bytes landed in %s", p)
			}
		}
		return nil
	})
}

// TestPrefixPlantedRefused: mallory plants, in a sticky prefix the daemon
// shares with everyone, what would make a flush write through a link or
// into a directory of hers: the dataset's directory as a link to a
// directory of the daemon's user; the directory itself, open to all, with
// links at the file's final and temporary names to that user's private
// file; scrfs's own .scrfs. The flush fails naming the planted path, for a
// daemon of root and of an ordinary user alike; the private file is as it
// was and no byte of the checkpoint is in the prefix.
func TestPrefixPlantedRefused(t *testing.T) {
	mallory := testAccount(t, "scrfs-e2e-mallory")
	alice := testAccount(t, "scrfs-e2e-alice")
	requireFUSE(t)
	for _, who := range []struct {
		name  string
		owner *account
	}{{"root", nil}, {"ordinary user", &alice}} {
		for _, tc := range []struct {
			name    string
			plant   string // a shell script of mallory's; %[1]s the prefix, %[2]s the victim file
			refused string // the path the error names, below the prefix
			why     string
		}{
			{"dataset directory is a link", "ln -s %[3]s %[1]s/ckpt.1", "ckpt.1", "symbolic link"},
			{"dataset directory planted with links", "mkdir -m 777 %[1]s/ckpt.1 && ln -s %[2]s %[1]s/ckpt.1/a.bin && ln -s %[2]s %[1]s/ckpt.1/.a.bin.scrfs-tmp.0",
				"ckpt.1", "belongs to uid " + strconv.Itoa(int(mallory.uid))},
			{".scrfs planted", "mkdir -m 777 %[1]s/.scrfs && ln -s %[2]s %[1]s/.scrfs/index.json", ".scrfs", "belongs to uid " + strconv.Itoa(int(mallory.uid))},
		} {
			t.Run(who.name+"/"+tc.name, func(t *testing.T) {
				if who.owner != nil {
					if fi, err := os.Stat("/dev/fuse"); err != nil || fi.Mode().Perm()&0o006 != 0o006 {
						t.Skip("/dev/fuse is not open to ordinary users here: no daemon of theirs can mount")
					}
				}
				prefix := sharedDir(t, true, nil)
				victim, unchanged := victimFile(t, who.owner)
				base := sharedDir(t, true, nil)
				env := []string{"SCRFS_PATHS_PREFIX=" + prefix, "SCRFS_FLUSH_EVERY=0"}
				var n *Node
				if who.owner != nil {
					keys := sharedDir(t, false, who.owner)
					n = userNode(t, *who.owner, base, append(env, "SCRFS_PREFIX_KEY_FILE="+filepath.Join(keys, "prefix.key"))...)
				} else {
					n = rootNode(t, base, env...)
				}
				if out, err := mallory.run(t, fmt.Sprintf(tc.plant, prefix, victim, filepath.Dir(victim))); err != nil {
					t.Fatalf("planting as %s: %v: %s", mallory.name, err, out)
				}
				n.Start()
				want := writeDataset(t, n, "ckpt.1", 1)
				out, errs, code := n.CLI("flush", "--wait", "ckpt.1")
				path := filepath.Join(prefix, tc.refused)
				if code == 0 || !strings.Contains(errs, "refusing "+path+": ") || !strings.Contains(errs, tc.why) {
					t.Fatalf("scrfs flush --wait: exit %d, want an error refusing %s (%s): %s%s", code, path, tc.why, out, errs)
				}
				unchanged()
				noDataIn(t, prefix, want)
				if b, _ := os.ReadFile(victim); bytes.Contains(b, []byte("complete")) {
					t.Error("the index was written through the planted link")
				}
			})
		}
	}
}

// TestPrefixSwappedRefused: someone who can write the prefix replaces a
// flushed file and patches its CRC32C in the manifest to match. The MAC of
// the manifest no longer verifies: the fetch refuses the dataset, says so,
// and falls back to the older one, whose bytes the application reads.
func TestPrefixSwappedRefused(t *testing.T) {
	prefix, n, want1 := twoFlushed(t)
	must(t, n.Stop())

	evil := bytes.Repeat([]byte("x"), 302_000) // a.bin's size
	must(t, os.WriteFile(filepath.Join(prefix, "ckpt.2", "a.bin"), evil, 0o644))
	man := filepath.Join(prefix, ".scrfs", "manifests", "ckpt.2", "manifest.json")
	b, err := os.ReadFile(man)
	must(t, err)
	crc := fmt.Sprintf("%08x", crc32cOf(evil))
	must(t, os.WriteFile(man, patchCRC(t, b, "a.bin", crc), 0o644))

	wipe(t, n)
	n.Start()
	n.WaitLog(time.Second, "fetch failed, recorded in the index", "dataset=ckpt.2", "MAC of the manifest", "does not verify")
	n.WaitCompleted(time.Second, "ckpt.1")
	sameSums(t, "ckpt.1 fetched", treeSums(t, n.Path("ckpt.1")), want1)
	if _, err := os.Stat(n.Path("ckpt.2")); !os.IsNotExist(err) {
		t.Fatalf("the swapped ckpt.2 is shown: %v", err)
	}
}

// TestSecretFileOfAnotherUser: a daemon run by root is given a job secret
// file that mallory owns (mode 0600, so only she and root can read it):
// it refuses to start, saying whose it is.
func TestSecretFileOfAnotherUser(t *testing.T) {
	mallory := testAccount(t, "scrfs-e2e-mallory")
	requireFUSE(t)
	dir := sharedDir(t, false, &mallory)
	secret := filepath.Join(dir, "secret")
	if out, err := mallory.run(t, fmt.Sprintf("umask 077 && echo mallorys-secret-0123456789abcdef > %s", secret)); err != nil {
		t.Fatalf("writing the secret as %s: %v: %s", mallory.name, err, out)
	}
	c := NewCluster(t, 2, "SCRFS_JOB_SECRET=", "SCRFS_JOB_SECRET_FILE="+secret)
	n := c.Nodes[0]
	n.StartNoWait()
	if err := n.WaitExit(30 * time.Second); err == nil {
		t.Fatal("the daemon started with another user's secret file")
	}
	n.WaitLog(time.Second, "job secret "+secret, "belongs to another user (uid "+strconv.Itoa(int(mallory.uid))+")")
	if mounted(n.Mount) {
		t.Error("mounted although it refused to start")
	}
}

// TestMountpointPlantedRefused: in a shared sticky directory (as /tmp),
// mallory makes the predictable mountpoint a link to a directory of hers,
// or makes it herself: a daemon of root refuses both, naming the path, and
// her directory gets nothing of the application's.
func TestMountpointPlantedRefused(t *testing.T) {
	mallory := testAccount(t, "scrfs-e2e-mallory")
	requireFUSE(t)
	shared := sharedDir(t, true, nil)
	hers := filepath.Join(shared, "mallory")
	if out, err := mallory.run(t, fmt.Sprintf("mkdir -m 777 %[1]s/mallory %[1]s/scr-dir && ln -s %[1]s/mallory %[1]s/scr-link", shared)); err != nil {
		t.Fatalf("planting as %s: %v: %s", mallory.name, err, out)
	}
	for _, tc := range []struct{ mnt, why string }{
		{"scr-link", "is a symbolic link"},
		{"scr-dir", "belongs to uid " + strconv.Itoa(int(mallory.uid))},
	} {
		t.Run(tc.mnt, func(t *testing.T) {
			n := rootNode(t, sharedDir(t, true, nil))
			n.Mount = filepath.Join(shared, tc.mnt)
			n.StartNoWait()
			if err := n.WaitExit(30 * time.Second); err == nil {
				t.Fatal("the daemon mounted on a planted mountpoint")
			}
			n.WaitLog(time.Second, "mountpoint "+n.Mount+" "+tc.why, "fuse.trust_mountpoint")
			if mounted(n.Mount) || mounted(hers) {
				t.Error("mounted although it refused")
			}
			if es, _ := os.ReadDir(hers); len(es) > 0 {
				t.Errorf("%s's directory got %d entries", mallory.name, len(es))
			}
		})
	}
	// With the configuration's consent the link is followed.
	n := rootNode(t, sharedDir(t, true, nil), "SCRFS_FUSE_TRUST_MOUNTPOINT=true")
	n.Mount = filepath.Join(shared, "scr-dir")
	n.Start()
	if !mounted(n.Mount) {
		t.Fatal("not mounted with fuse.trust_mountpoint = true")
	}
}

// crc32cOf is the CRC32C of b, as manifests record it.
func crc32cOf(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// patchCRC sets the crc32c of path's entry in a manifest to hexCRC, as
// someone editing the file would.
func patchCRC(t *testing.T, man []byte, path, hexCRC string) []byte {
	t.Helper()
	i := bytes.Index(man, []byte(`"path":"`+path+`"`))
	if i < 0 {
		t.Fatalf("no entry of %s in the manifest:\n%s", path, man)
	}
	j := bytes.Index(man[i:], []byte(`"crc32c":"`))
	if j < 0 {
		t.Fatalf("no crc32c of %s in the manifest:\n%s", path, man)
	}
	at := i + j + len(`"crc32c":"`)
	out := append([]byte(nil), man...)
	copy(out[at:at+8], hexCRC)
	return out
}
