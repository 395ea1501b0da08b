package e2e

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// Issue 25: AI frameworks restart unmodified. Each framework's save and its
// "find and load the latest checkpoint" are replayed from its own source
// (replay_<framework>_test.go): the file operations every rank does, in
// order, with the barriers between them, on 4 daemons, one rank per node's
// mount. The bytes are synthetic (seeded), the names, flags, order and
// which rank does what are the framework's. They rely on the pointer files
// at the mount root (the rule pointer:NAME among them) and, for Orbax's
// default mode, on a directory renamed inside the checkpoint being
// written (replay_orbax_test.go). TestFrameworkReplaysReference runs every
// replay on a plain directory, as on a parallel file system.

// framework is one framework's replay: its save and its find-latest, the
// configuration the guide recommends for it, and where a save is killed.
type framework struct {
	name string
	// env configures the daemons: datasets.match and datasets.complete.
	env []string
	// save performs step's save as rank r does.
	save func(r *rank, step int) error
	// latest finds the checkpoint the framework would load on rank rank of
	// world, through root (the save directory): what it reads, as it reads
	// it.
	latest func(root string, rank, world int) (found, error)
	// checkpoint is where step's checkpoint is, relative to the save
	// directory; dataset is scrfs's dataset of it.
	checkpoint func(step int) string
	dataset    func(step int) string
	// pointers are the files the framework keeps at the save directory's
	// root, beside its checkpoints.
	pointers []string
	// victim is the rank whose node is killed in the middle of a save, while
	// it writes the file kill names (relative to the save directory).
	victim int
	kill   func(rel string, step int) bool
}

// found is what a framework's find-latest chose: the checkpoint, and the
// files it reads to load it (relative to the save directory).
type found struct {
	checkpoint string
	reads      []string
}

// replayFrameworks are the replays, each in its own file.
var replayFrameworks = []framework{deepspeed, megatron, lightning, lightningSharded, hfTrainer, orbax, orbaxCommitFile}

// errAborted is what a rank waiting for others gets when another rank
// failed: the job dies, as a collective does when a rank is gone.
var errAborted = errors.New("another rank failed; the job was aborted")

// job runs the ranks of one replayed job, rank r on roots[r], and keeps
// the model of what they wrote: the job-wide namespace as every rank's
// writes, renames and removals left it.
type job struct {
	fw    *framework
	roots []string
	tmp   string // TMPDIR of every rank, outside the mounts

	mu      sync.Mutex
	waiting int
	gen     chan struct{} // closed when the barrier's current round is full
	signals map[string]chan struct{}
	failed  chan struct{} // closed when a rank failed
	model   map[string]modelEntry

	// crash, when set, pauses the victim in the middle of the file it
	// names: paused is sent on, and the rank goes on when resume is closed.
	crash  func(rank int, rel string) bool
	paused chan struct{}
	resume chan struct{}
}

// modelEntry is a regular file's sha256, or a symlink's target.
type modelEntry struct {
	sum    string
	target string
}

// rank is one rank of a replayed job.
type rank struct {
	id, world int
	root      string // the save directory through this rank's node's mount
	job       *job
}

func newJob(fw *framework, roots []string, tmp string) *job {
	return &job{fw: fw, roots: roots, tmp: tmp, model: map[string]modelEntry{}}
}

// run runs one save (or any step of the job) on every rank at once, its
// barriers and signals new, and returns every rank's error; a rank's error
// aborts the others' waits.
// Ranks still running after a while are reported as a hang: a call on a
// mount that never returns.
func (j *job) run(what string, f func(r *rank) error) error {
	j.mu.Lock()
	j.failed, j.waiting, j.gen, j.signals = make(chan struct{}), 0, make(chan struct{}), map[string]chan struct{}{}
	j.mu.Unlock()
	errs := make([]error, len(j.roots))
	var wg sync.WaitGroup
	for i, root := range j.roots {
		wg.Go(func() {
			if err := f(&rank{id: i, world: len(j.roots), root: root, job: j}); err != nil {
				errs[i] = fmt.Errorf("rank %d: %w", i, err)
				j.abort()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return errors.Join(errs...)
	case <-time.After(testutil.Scale(2 * time.Minute)):
		return fmt.Errorf("HANG: %s: ranks still running after %v", what, testutil.Scale(2*time.Minute))
	}
}

// abort releases every rank waiting at a barrier or for a signal.
func (j *job) abort() {
	j.mu.Lock()
	defer j.mu.Unlock()
	select {
	case <-j.failed:
	default:
		close(j.failed)
	}
}

// barrier waits until every rank reached it (a collective of the
// framework: torch.distributed.barrier, an all-gather, a JAX sync).
func (r *rank) barrier() error {
	j := r.job
	j.mu.Lock()
	gen, failed := j.gen, j.failed
	if j.waiting++; j.waiting == r.world {
		j.waiting, j.gen = 0, make(chan struct{})
		close(gen)
	}
	j.mu.Unlock()
	select {
	case <-gen:
		return nil
	case <-failed:
		return errAborted
	}
}

// signal tells the ranks awaiting name that this rank got there; one rank
// signals each name.
func (r *rank) signal(name string) { close(r.job.event(name)) }

// await waits for another rank's signal: an order between ranks that the
// framework does not enforce but the replay takes, saying why.
func (r *rank) await(name string) error {
	select {
	case <-r.job.event(name):
		return nil
	case <-r.job.failed:
		return errAborted
	}
}

func (j *job) event(name string) chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.signals[name] == nil {
		j.signals[name] = make(chan struct{})
	}
	return j.signals[name]
}

// at is a path of the save directory through this rank's mount.
func (r *rank) at(rel string) string { return filepath.Join(r.root, rel) }

// alive fails once the job is torn down: after a rank, or its node, died,
// the others do nothing more (the launcher kills them).
func (r *rank) alive() error {
	select {
	case <-r.job.failed:
		return errAborted
	default:
		return nil
	}
}

// makedirs is Python's os.makedirs(rel, exist_ok=True).
func (r *rank) makedirs(rel string) error {
	if err := r.alive(); err != nil {
		return err
	}
	return os.MkdirAll(r.at(rel), 0o777)
}

// mkdir is os.mkdir (Path.mkdir without exist_ok).
func (r *rank) mkdir(rel string) error {
	if err := r.alive(); err != nil {
		return err
	}
	return os.Mkdir(r.at(rel), 0o777)
}

// exists is os.path.exists.
func (r *rank) exists(rel string) bool {
	if r.alive() != nil {
		return false
	}
	_, err := os.Stat(r.at(rel))
	return err == nil
}

// listdir is os.listdir.
func (r *rank) listdir(rel string) ([]string, error) {
	if err := r.alive(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(r.at(rel))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}

// payload is size seeded bytes, the same for the same job, step, rank and
// file: what a framework would serialize there.
func (r *rank) payload(rel string, step, size int) []byte {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%d/%s", r.job.fw.name, step, r.id, rel)
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x9e3779b97f4a7c15))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// write is open(rel, "wb") (O_WRONLY|O_CREAT|O_TRUNC), then data in writes
// of chunk bytes, an fsync when sync is set, and close: torch.save, a
// Python file object, a tensorstore or safetensors writer all come to
// this. The victim of a killed save pauses halfway through its file.
func (r *rank) write(rel string, data []byte, chunk int, sync bool) error {
	if err := r.alive(); err != nil {
		return err
	}
	f, err := os.OpenFile(r.at(rel), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	crash := r.job.crash != nil && r.job.crash(r.id, rel)
	for off := 0; off < len(data) && err == nil; off += chunk {
		if crash && off >= len(data)/2 {
			crash = false
			r.job.paused <- struct{}{}
			<-r.job.resume
		}
		_, err = f.Write(data[off:min(off+chunk, len(data))])
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	r.job.put(rel, modelEntry{sum: sha256hex(data)})
	return nil
}

// writeText is a small text file written at once, as Python's
// open(rel, "w").write(s) or json.dump do.
func (r *rank) writeText(rel, s string) error { return r.write(rel, []byte(s), len(s)+1, false) }

// rename is os.rename; the model moves everything below a directory.
func (r *rank) rename(from, to string) error {
	if err := r.alive(); err != nil {
		return err
	}
	if err := os.Rename(r.at(from), r.at(to)); err != nil {
		return err
	}
	j := r.job
	j.mu.Lock()
	defer j.mu.Unlock()
	for p, e := range j.model {
		if rest, ok := strings.CutPrefix(p, from); ok && (rest == "" || rest[0] == '/') {
			delete(j.model, p)
			j.model[to+rest] = e
		}
	}
	return nil
}

// symlink is os.symlink(target, rel).
func (r *rank) symlink(target, rel string) error {
	if err := r.alive(); err != nil {
		return err
	}
	if err := os.Symlink(target, r.at(rel)); err != nil {
		return err
	}
	r.job.put(rel, modelEntry{target: target})
	return nil
}

// remove is os.remove.
func (r *rank) remove(rel string) error {
	if err := r.alive(); err != nil {
		return err
	}
	if err := os.Remove(r.at(rel)); err != nil {
		return err
	}
	r.job.drop(rel)
	return nil
}

// rmtree is shutil.rmtree: every entry below rel removed, children first,
// then rel; with ignoreErrors, failures are passed over as Python does.
// The model forgets what is gone.
func (r *rank) rmtree(rel string, ignoreErrors bool) error {
	if err := r.alive(); err != nil {
		return err
	}
	var dirs []string
	err := filepath.WalkDir(r.at(rel), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return os.Remove(p)
	})
	if err == nil || ignoreErrors {
		for _, d := range slices.Backward(dirs) {
			if rerr := os.Remove(d); rerr != nil && err == nil {
				err = rerr
			}
		}
	}
	j := r.job
	j.mu.Lock()
	for p := range j.model {
		if inside(p, rel) {
			if _, lerr := os.Lstat(r.at(p)); errors.Is(lerr, fs.ErrNotExist) {
				delete(j.model, p)
			}
		}
	}
	j.mu.Unlock()
	if ignoreErrors {
		return nil
	}
	return err
}

// inside tells whether path p is dir or below it.
func inside(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func (j *job) put(rel string, e modelEntry) {
	j.mu.Lock()
	j.model[path.Clean(rel)] = e
	j.mu.Unlock()
}

func (j *job) drop(rel string) {
	j.mu.Lock()
	delete(j.model, path.Clean(rel))
	j.mu.Unlock()
}

// snapshot copies the model: what a completed save left.
func (j *job) snapshot() map[string]modelEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return maps.Clone(j.model)
}

// save runs step's save on every rank and requires it to succeed.
func (j *job) save(t *testing.T, step int) map[string]modelEntry {
	t.Helper()
	if err := j.run(fmt.Sprintf("%s save %d", j.fw.name, step), func(r *rank) error { return j.fw.save(r, step) }); err != nil {
		t.Fatalf("%s save %d: %v", j.fw.name, step, err)
	}
	return j.snapshot()
}

// checkLatest runs the framework's find-latest on each root, rank i of
// len(roots) on roots[i], and requires it to choose step's checkpoint and
// read it, and the pointer files, as saved (want, the model after that
// save).
func checkLatest(t *testing.T, fw *framework, when string, roots []string, step int, want map[string]modelEntry) {
	t.Helper()
	for i, root := range roots {
		res := make(chan error, 1)
		go func() { res <- verifyLatest(fw, root, i, len(roots), step, want) }()
		select {
		case err := <-res:
			if err != nil {
				t.Errorf("%s: %s's find-latest on node %d: %v", when, fw.name, i, err)
			}
		case <-time.After(testutil.Scale(time.Minute)):
			t.Fatalf("HANG: %s: %s's find-latest on node %d still running after %v", when, fw.name, i, testutil.Scale(time.Minute))
		}
	}
}

// verifyLatest is checkLatest on one root.
func verifyLatest(fw *framework, root string, rank, world, step int, want map[string]modelEntry) error {
	got, err := fw.latest(root, rank, world)
	if err != nil {
		return err
	}
	if got.checkpoint != fw.checkpoint(step) {
		return fmt.Errorf("found %q, want %q, the newest complete checkpoint", got.checkpoint, fw.checkpoint(step))
	}
	var errs []error
	for _, rel := range got.reads {
		if err := sameAsModel(root, rel, want); err != nil {
			errs = append(errs, err)
		}
	}
	// Every file of the checkpoint, and nothing else, byte for byte.
	ckpt := fw.checkpoint(step)
	seen := map[string]bool{}
	err = filepath.WalkDir(filepath.Join(root, ckpt), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		seen[rel] = true
		if _, ok := want[rel]; !ok {
			errs = append(errs, fmt.Errorf("%s is shown, but the save did not leave it", rel))
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	for rel := range want {
		if inside(rel, ckpt) {
			if !seen[rel] {
				errs = append(errs, fmt.Errorf("%s, which the save wrote, is missing", rel))
			} else if err := sameAsModel(root, rel, want); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, p := range fw.pointers {
		if _, ok := want[p]; ok {
			if err := sameAsModel(root, p, want); err != nil {
				errs = append(errs, fmt.Errorf("pointer file: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// sameAsModel checks the entry at rel below root against the model: a
// file's bytes, or a symlink's target and what it points to (a directory's
// files are checked as the checkpoint's).
func sameAsModel(root, rel string, want map[string]modelEntry) error {
	rel = path.Clean(rel)
	e, ok := want[rel]
	if !ok {
		return fmt.Errorf("%s was read, but the save did not write it", rel)
	}
	p := filepath.Join(root, rel)
	if e.target == "" {
		sum, err := sumFile(p)
		if err != nil {
			return err
		}
		if sum != e.sum {
			return fmt.Errorf("%s: sha256 %.16s, the save wrote %.16s", rel, sum, e.sum)
		}
		return nil
	}
	target, err := os.Readlink(p)
	if err != nil || target != e.target {
		return fmt.Errorf("%s: symlink to %q (%v), want %q", rel, target, err, e.target)
	}
	resolved := path.Join(path.Dir(rel), e.target)
	if _, ok := want[resolved]; ok {
		return sameAsModel(root, resolved, want)
	}
	for q := range want {
		if inside(q, resolved) {
			return nil
		}
	}
	return fmt.Errorf("%s points to %s, which the save did not leave", rel, e.target)
}

// frameworkEnv is what every replay's daemons share: XOR over 4 nodes, a
// prefix flushed to on demand only.
func frameworkEnv(prefix string, fw *framework) []string {
	return append([]string{"SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_PATHS_PREFIX=" + prefix, "SCRFS_FLUSH_EVERY=0",
		"SCRFS_RESTART_MEMBER_TIMEOUT=10s"}, fw.env...)
}

// TestFrameworkReplays: each framework saves twice through 4 daemons, a
// rank per node, and its find-latest on every node finds and reads the
// second checkpoint — after the daemons are restarted, after node 0 is
// lost and replaced, and, once flushed, from the prefix on 2 fresh nodes;
// a third save cut by a node's SIGKILL is never the one found.
func TestFrameworkReplays(t *testing.T) {
	for i := range replayFrameworks {
		fw := &replayFrameworks[i]
		t.Run(fw.name, func(t *testing.T) {
			requireFUSE(t)
			replay(t, fw)
		})
	}
}

// replay is one framework's scenario.
func replay(t *testing.T, fw *framework) {
	prefix := t.TempDir()
	env := frameworkEnv(prefix, fw)
	c := NewCluster(t, 4, env...).Start()
	roots := mountsOf(c, 0, 1, 2, 3)
	j := newJob(fw, roots, t.TempDir())
	j.save(t, 1)
	want := j.save(t, 2)
	c.WaitState(testutil.Scale(time.Minute), fw.dataset(2), "protected")
	checkLatest(t, fw, "saved", roots, 2, want)

	// (a) Every daemon restarted on its cache.
	for _, n := range c.Nodes {
		must(t, n.Stop())
	}
	c.Start()
	checkLatest(t, fw, "restarted", roots, 2, want)

	// (b) Node 0, which holds rank 0's files and the pointers, lost.
	c.replace(t, 0, false).Start()
	checkLatest(t, fw, "node 0 replaced", roots, 2, want)

	// A third save, its victim's node killed halfway through its file.
	killedSave(t, c, j, 3)
	checkLatest(t, fw, "a save killed", roots, 2, want)

	// (c) Flushed at the end of the job, as the guide's job scripts do,
	// every cache gone, restarted on 2 nodes from the prefix.
	flush := func(args ...string) string {
		t.Helper()
		out, errs, code, err := c.Nodes[0].CLIWithin(testutil.Scale(2*time.Minute), append([]string{"flush", "--wait"}, args...)...)
		if err != nil || code != 0 {
			t.Fatalf("scrfs flush --wait %s: exit %d, %v: %s%s", strings.Join(args, " "), code, err, out, errs)
		}
		return out
	}
	if out := flush(); !strings.Contains(out, fw.dataset(2)+" flushed") {
		// Go on with the newest, to see the restart from the prefix.
		t.Errorf("scrfs flush --wait flushed the wrong dataset: %s(want %s, the newest complete one)", out, fw.dataset(2))
		flush(fw.dataset(2))
	}
	stopWiped(t, c)
	c2 := NewCluster(t, 2, env...).Start()
	checkLatest(t, fw, "from the prefix on 2 nodes", mountsOf(c2, 0, 1), 2, want)
}

// killedSave runs step's save and SIGKILLs the victim's node while the
// victim is halfway through its file; the save must fail, and the node's
// daemon is started again on its cache.
func killedSave(t *testing.T, c *Cluster, j *job, step int) {
	t.Helper()
	fw := j.fw
	j.crash = func(r int, rel string) bool { return r == fw.victim && fw.kill(rel, step) }
	j.paused, j.resume = make(chan struct{}), make(chan struct{})
	defer func() { j.crash = nil }()
	done := make(chan error, 1)
	go func() {
		done <- j.run(fmt.Sprintf("%s save %d", fw.name, step), func(r *rank) error { return fw.save(r, step) })
	}()
	select {
	case <-j.paused:
	case err := <-done:
		t.Fatalf("save %d ended (%v) before rank %d wrote half of its file", step, err, fw.victim)
	}
	c.Nodes[fw.victim].Kill()
	j.abort()
	close(j.resume)
	switch err := <-done; {
	case err == nil:
		// The victim's file may be passed through to the kernel, whose
		// writes reach the cache file with its daemon dead: the ranks do
		// not notice, and the restart fails the checkpoint all the same.
		t.Logf("save %d returned on every rank although node %d was killed halfway through it", step, fw.victim)
	case strings.HasPrefix(err.Error(), "HANG"):
		t.Fatal(err)
	}
	c.Nodes[fw.victim].Start()
}

// TestFrameworkReplaysReference: every replay, on one plain directory all
// 4 ranks share (as on a parallel file system), saves twice and its
// find-latest chooses and reads the second save: the replays are
// consistent with themselves, so a failure through the mounts is scrfs's.
func TestFrameworkReplaysReference(t *testing.T) {
	for i := range replayFrameworks {
		fw := &replayFrameworks[i]
		t.Run(fw.name, func(t *testing.T) {
			roots := slices.Repeat([]string{t.TempDir()}, 4)
			j := newJob(fw, roots, t.TempDir())
			j.save(t, 1)
			want := j.save(t, 2)
			checkLatest(t, fw, "saved on a plain directory", roots, 2, want)
		})
	}
}
