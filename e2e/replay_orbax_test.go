package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/scrfs/scrfs/internal/testutil"
)

// Orbax's CheckpointManager on 4 JAX processes, replayed from google/orbax
// at v0.12.3 (a909225), checkpoint/orbax/checkpoint/:
// _src/checkpointers/checkpointer.py Checkpointer.save (the blocking save;
// the async one does the same file operations from a background thread),
// _src/path/atomicity.py (create_all, _create_tmp_directory,
// AtomicRenameTemporaryPath.finalize, on_commit_callback) and
// atomicity_defaults.py (a local path's items are AtomicRenameTemporaryPaths
// too), _src/handlers/composite_checkpoint_handler.py (async_save, finalize),
// _src/handlers/base_pytree_checkpoint_handler.py (OCDBT: each process's
// arrays under ocdbt.process_<i>/, the primary's _METADATA,
// merge_ocdbt_per_process_files in finalize),
// _src/metadata/array_metadata_store.py (array_metadatas/process_<i>, its
// directory made by the primary while the others poll for it),
// _src/metadata/checkpoint.py (_CHECKPOINT_METADATA); TensorStore's file
// key-value store writes data files in place and the manifest through
// manifest.ocdbt.__lock renamed into place (kLockSuffix). Find-latest:
// checkpoint_manager.py _load_checkpoint_infos and latest_step,
// _src/path/step.py _StandardNameFormat.find_all and
// _src/path/temporary_paths.py is_path_finalized.
//
// The CheckpointManager's directory is the mount, one item "default"
// (StandardSave). By default (AtomicityMode.AUTO: ATOMIC_RENAME on a local
// path) the primary host makes <step>.orbax-checkpoint-tmp (a dataset
// under the default datasets.match), the item's
// default.orbax-checkpoint-tmp inside it, and renames both into place when
// every process is done: the rename rule completes the step. With
// AtomicityOptions(mode=COMMIT_FILE) nothing is renamed: <step>/ is made
// under its own name and the primary writes commit_success.txt into it
// last, after the item's own, which the marker rule waits for.
var orbax = orbaxFramework("orbax", "rename", false)

// orbaxCommitFile is Orbax with AtomicityMode.COMMIT_FILE.
var orbaxCommitFile = orbaxFramework("orbax-commit-file", "marker:"+orbaxCommitSuccess, true)

// orbaxFramework is the replay of one atomicity mode, completed by rule.
func orbaxFramework(name, rule string, commitFile bool) framework {
	return framework{
		name:       name,
		env:        []string{"SCRFS_DATASETS_COMPLETE=" + rule},
		save:       func(r *rank, step int) error { return orbaxSave(r, step, commitFile) },
		latest:     func(root string, rank, world int) (found, error) { return orbaxLatest(root, commitFile) },
		checkpoint: strconv.Itoa,
		dataset:    strconv.Itoa,
		victim:     2,
		kill:       orbaxKill,
	}
}

// orbaxKill is process 2's data file of step.
func orbaxKill(rel string, step int) bool {
	return strings.HasPrefix(rel, strconv.Itoa(step)) && strings.Contains(rel, "/ocdbt.process_2/d/")
}

// orbaxCommitSuccess is atomicity_types.COMMIT_SUCCESS_FILE.
const orbaxCommitSuccess = "commit_success.txt"

// orbaxTmpSuffix is atomicity_types.TMP_DIR_SUFFIX.
const orbaxTmpSuffix = ".orbax-checkpoint-tmp"

func orbaxTmp(final string) string { return final + orbaxTmpSuffix }

// orbaxStepMetadata is the StepMetadata Orbax keeps in _CHECKPOINT_METADATA.
type orbaxStepMetadata struct {
	ItemHandlers map[string]string `json:"item_handlers"`
	Init         int64             `json:"init_timestamp_nsecs"`
	Commit       *int64            `json:"commit_timestamp_nsecs"`
}

// orbaxDataFile is a TensorStore data file's name below d/, unique per
// step, process and purpose.
func orbaxDataFile(step, process int, what string) string {
	h := fnv.New128a()
	fmt.Fprintf(h, "%d/%d/%s", step, process, what)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// orbaxSave is CheckpointManager.save(step, args=StandardSave(state)) with
// the blocking Checkpointer, as process r.id runs it (process 0 is the
// primary host); commitFile chooses AtomicityMode.COMMIT_FILE (the
// temporary paths are the final ones) over ATOMIC_RENAME.
func orbaxSave(r *rank, step int, commitFile bool) error {
	final := strconv.Itoa(step)
	tmp, item := orbaxTmp(final), path.Join(orbaxTmp(final), orbaxTmp("default"))
	if commitFile {
		tmp, item = final, path.Join(final, "default")
	}
	primary := r.id == 0
	// Checkpointer.save: the save_start sync and the operation id's sync.
	for range 2 {
		if err := r.barrier(); err != nil {
			return err
		}
	}
	if r.exists(final) {
		return fmt.Errorf("destination %s already exists", final)
	}
	// create_all of the step's temporary directory: the primary makes it
	// and writes the initial StepMetadata, between two syncs.
	if err := r.barrier(); err != nil {
		return err
	}
	init := time.Now().UnixNano()
	if primary {
		if r.exists(tmp) {
			if err := r.rmtree(tmp, false); err != nil {
				return err
			}
		}
		if err := r.mkdir(tmp); err != nil {
			return err
		}
		if err := orbaxWriteStepMetadata(r, tmp, orbaxStepMetadata{Init: init}); err != nil {
			return err
		}
	}
	if err := r.barrier(); err != nil {
		return err
	}
	// CompositeCheckpointHandler.async_save: create_all of the item's
	// temporary directory, the same way.
	if err := r.barrier(); err != nil {
		return err
	}
	if primary {
		r.exists(item)
		if err := r.mkdir(item); err != nil {
			return err
		}
	}
	if err := r.barrier(); err != nil {
		return err
	}
	// The PyTree handler with OCDBT: this process's arrays under
	// ocdbt.process_<i>/ — a data file, then the manifest.
	proc := path.Join(item, fmt.Sprintf("ocdbt.process_%d", r.id))
	if err := r.makedirs(path.Join(proc, "d")); err != nil {
		return err
	}
	data := path.Join(proc, "d", orbaxDataFile(step, r.id, "data"))
	if err := r.write(data, r.payload(data, step, 320<<10+r.id*777), 64<<10, true); err != nil {
		return err
	}
	if err := tensorstoreManifest(r, proc, step); err != nil {
		return err
	}
	// The array metadata store: the primary makes array_metadatas/, the
	// others poll for it every 0.25 s; each writes its own file.
	amd := path.Join(item, "array_metadatas")
	if primary {
		if err := r.makedirs(amd); err != nil {
			return err
		}
	} else if err := r.poll(amd); err != nil {
		return err
	}
	if err := r.writeText(path.Join(amd, fmt.Sprintf("process_%d", r.id)), fmt.Sprintf(`{"array_metadatas": [{"array_metadata": {"param_name": "params.w%d", "write_shape": [256, 256]}}]}`, r.id)); err != nil {
		return err
	}
	if primary {
		// _write_metadata_after_commits, once its own writes are durable.
		if err := r.writeText(path.Join(item, "_METADATA"), `{"tree_metadata": {"('params', 'w')": {"value_type": "jax.Array"}}, "use_ocdbt": true, "use_zarr3": false}`); err != nil {
			return err
		}
		// _save_step_metadata: the StepMetadata updated.
		if err := orbaxWriteStepMetadata(r, tmp, orbaxStepMetadata{Init: init, ItemHandlers: orbaxHandlers}); err != nil {
			return err
		}
	}
	if err := r.barrier(); err != nil { // "Checkpointer:save"
		return err
	}
	if primary {
		if err := orbaxFinalize(r, step, tmp, item, init, commitFile); err != nil {
			return err
		}
	}
	return r.barrier() // "Checkpointer:finalize"
}

// orbaxHandlers is the item handlers StepMetadata records.
var orbaxHandlers = map[string]string{"default": "orbax.checkpoint._src.handlers.standard_checkpoint_handler.StandardCheckpointHandler"}

// orbaxFinalize is the primary's finalize: the composite handler's (the
// per-process OCDBT files merged into the item's own manifest, then the
// item's commit_success.txt and, renaming, its rename into place) and
// on_commit_callback's (the StepMetadata's commit time, the step's
// commit_success.txt and rename).
func orbaxFinalize(r *rank, step int, tmp, item string, init int64, commitFile bool) error {
	procs, err := filepath.Glob(r.at(path.Join(item, "ocdbt.process_*")))
	if err != nil {
		return err
	}
	for _, p := range procs {
		if _, err := os.ReadFile(filepath.Join(p, "manifest.ocdbt")); err != nil {
			return err
		}
	}
	if err := r.makedirs(path.Join(item, "d")); err != nil {
		return err
	}
	node := path.Join(item, "d", orbaxDataFile(step, -1, "merged"))
	if err := r.write(node, r.payload(node, step, 8<<10), 8<<10, true); err != nil {
		return err
	}
	if err := tensorstoreManifest(r, item, step); err != nil {
		return err
	}
	finalItem := path.Join(tmp, "default")
	if err := r.writeText(path.Join(item, orbaxCommitSuccess), "Checkpoint commit was successful to "+r.at(finalItem)); err != nil {
		return err
	}
	if !commitFile {
		if err := r.rename(item, finalItem); err != nil {
			return err
		}
	}
	commit := time.Now().UnixNano()
	if err := orbaxWriteStepMetadata(r, tmp, orbaxStepMetadata{Init: init, Commit: &commit, ItemHandlers: orbaxHandlers}); err != nil {
		return err
	}
	final := strconv.Itoa(step)
	if err := r.writeText(path.Join(tmp, orbaxCommitSuccess), "Checkpoint commit was successful to "+r.at(final)); err != nil {
		return err
	}
	if commitFile {
		return nil
	}
	return r.rename(tmp, final)
}

// tensorstoreManifest is an OCDBT manifest written the way TensorStore's
// file store writes it atomically: to manifest.ocdbt.__lock, fsync'd,
// renamed over manifest.ocdbt.
func tensorstoreManifest(r *rank, dir string, step int) error {
	lock := path.Join(dir, "manifest.ocdbt.__lock")
	if err := r.write(lock, r.payload(path.Join(dir, "manifest.ocdbt"), step, 2<<10), 2<<10, true); err != nil {
		return err
	}
	return r.rename(lock, path.Join(dir, "manifest.ocdbt"))
}

// orbaxWriteStepMetadata is the metadata store's write_text of
// _CHECKPOINT_METADATA (an update reads it first).
func orbaxWriteStepMetadata(r *rank, dir string, md orbaxStepMetadata) error {
	rel := path.Join(dir, "_CHECKPOINT_METADATA")
	if r.exists(rel) {
		if _, err := os.ReadFile(r.at(rel)); err != nil {
			return err
		}
	}
	b, err := json.Marshal(md)
	if err != nil {
		return err
	}
	return r.writeText(rel, string(b))
}

// poll waits for rel to exist, looking every 0.25 s, as the array metadata
// store's non-primary hosts do.
func (r *rank) poll(rel string) error {
	deadline := time.Now().Add(testutil.Scale(time.Minute))
	for !r.exists(rel) {
		select {
		case <-r.job.failed:
			return errAborted
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", rel)
		}
	}
	return nil
}

// orbaxStepName is _StandardNameFormat's name of a step (no prefix, no
// padding).
var orbaxStepName = regexp.MustCompile(`^(0|[1-9]\d*)$`)

// orbaxLatest is CheckpointManager(directory).latest_step() and the restore
// of it: every entry of the directory that is finalized (renaming: no
// temporary suffix; committing: commit_success.txt inside; a directory)
// and named like a step, its StepMetadata read for the commit time; the
// largest step; then the restore's reads — the StepMetadata, the item's
// metadata and manifest, every process's manifest and data files, the
// array metadata.
func orbaxLatest(root string, commitFile bool) (found, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return found{}, err
	}
	latest := -1
	for _, e := range entries {
		name := e.Name()
		if !commitFile && strings.Contains(name, orbaxTmpSuffix) {
			continue
		}
		if st, err := os.Stat(filepath.Join(root, name)); err != nil || !st.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, name, orbaxCommitSuccess)); commitFile && err != nil {
			continue
		}
		if !orbaxStepName.MatchString(name) {
			continue
		}
		var md orbaxStepMetadata
		b, err := os.ReadFile(filepath.Join(root, name, "_CHECKPOINT_METADATA"))
		if err == nil {
			err = json.Unmarshal(b, &md)
		}
		if err != nil {
			return found{}, fmt.Errorf("step %s: _CHECKPOINT_METADATA: %w", name, err)
		}
		if n, _ := strconv.Atoi(name); n > latest {
			latest = n
		}
	}
	if latest < 0 {
		return found{}, errors.New("latest_step() is None: Orbax would start from scratch")
	}
	step := strconv.Itoa(latest)
	reads := []string{path.Join(step, "_CHECKPOINT_METADATA")}
	item := path.Join(step, "default")
	for _, pattern := range []string{"_METADATA", "manifest.ocdbt", "d/*", "array_metadatas/*", "ocdbt.process_*/manifest.ocdbt", "ocdbt.process_*/d/*"} {
		matches, err := filepath.Glob(filepath.Join(root, item, pattern))
		if err != nil || len(matches) == 0 {
			return found{}, fmt.Errorf("restore of step %s: nothing at %s/%s (%v)", step, item, pattern, err)
		}
		for _, m := range matches {
			rel, _ := filepath.Rel(root, m)
			reads = append(reads, rel)
		}
	}
	return found{checkpoint: step, reads: reads}, nil
}
