package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// PyTorch Lightning's ModelCheckpoint, replayed from
// Lightning-AI/pytorch-lightning at 2.6.0 (8540370):
// src/lightning/pytorch/callbacks/model_checkpoint.py (on_train_batch_end:
// _save_topk_checkpoint, _save_none_monitor_checkpoint, _save_checkpoint,
// _save_last_checkpoint, _link_checkpoint, _find_last_checkpoints),
// trainer/trainer.py Trainer.save_checkpoint,
// trainer/connectors/checkpoint_connector.py _parse_ckpt_path("last"), and
// for the two layouts:
//
//   - one file per checkpoint (DDP): strategies/strategy.py save_checkpoint
//     on rank 0 through fabric/plugins/io/torch_io.py TorchCheckpointIO and
//     fabric/utilities/cloud_io.py _atomic_save, whose fsspec transaction
//     (fsspec/filesystem_spec fsspec/implementations/local.py at 93d92c8,
//     LocalFileOpener) writes a temporary file in TMPDIR and moves it into
//     place with shutil.move: a copy, since the mount is another file
//     system;
//   - a directory per checkpoint (FSDP, state_dict_type="sharded"):
//     strategies/fsdp.py FSDPStrategy.save_checkpoint and load_checkpoint,
//     every rank making the directory, PyTorch DCP's save (filesystem.py at
//     0140b62, one file per rank), then rank 0's meta.pt.
//
// The configuration the guide recommends: ModelCheckpoint(dirpath=MOUNT,
// filename="{step}", every_n_train_steps=N, save_top_k=-1,
// save_last="link"), resumed with trainer.fit(ckpt_path="last"). Each
// step=N.ckpt (file or directory) is a dataset of its own by
// datasets.match; last.ckpt is a symlink at the root, a pointer file.
var lightning = lightningFramework("lightning", lightningFileSave,
	// Only rank 0 writes a checkpoint file: its node is the one killed.
	0, func(rel string, step int) bool { return rel == lightningName(step) })

// lightningSharded is the same with FSDP's sharded checkpoints: a
// directory per checkpoint, every rank writing its shard.
var lightningSharded = lightningFramework("lightning-sharded", lightningShardedSave,
	2, func(rel string, step int) bool { return rel == path.Join(lightningName(step), "__2_0.distcp") })

// lightningFramework is the replay of one layout: write saves a checkpoint
// as the strategy does, and a save is killed while rank victim writes the
// file kill names.
func lightningFramework(name string, write func(r *rank, step int) error, victim int, kill func(rel string, step int) bool) framework {
	return framework{
		name:       name,
		env:        []string{"SCRFS_DATASETS_MATCH=" + lightningMatch, "SCRFS_DATASETS_COMPLETE=pointer:last.ckpt"},
		save:       func(r *rank, step int) error { return lightningSave(r, step, write) },
		latest:     lightningLatest,
		checkpoint: lightningName,
		dataset:    lightningName,
		pointers:   []string{"last.ckpt"},
		victim:     victim,
		kill:       kill,
	}
}

// lightningMatch makes each step=N.ckpt at the root a dataset, a file or a
// directory.
const lightningMatch = `^(?P<dataset>step=\d+\.ckpt)(/|$)`

// lightningName is format_checkpoint_name for filename="{step}".
func lightningName(step int) string { return fmt.Sprintf("step=%d.ckpt", step) }

// lightningSave is what every rank does in ModelCheckpoint's
// on_train_batch_end at a step to save: the top-k save (the strategy's
// save as write does it), then the link to it.
func lightningSave(r *rank, step int, write func(r *rank, step int) error) error {
	name := lightningName(step)
	// _get_metric_interpolated_filepath_name: file_exists on rank 0,
	// broadcast.
	if r.id == 0 {
		r.exists(name)
	}
	if err := r.barrier(); err != nil {
		return err
	}
	if err := write(r, step); err != nil {
		return err
	}
	// Trainer.save_checkpoint: strategy.barrier("Trainer.save_checkpoint").
	if err := r.barrier(); err != nil {
		return err
	}
	// _save_last_checkpoint: file_exists(last.ckpt) (equal to
	// last_model_path after the first save, so no version counter), then
	// _link_checkpoint on rank 0: the old link removed, the new one made
	// relative to the directory; a barrier.
	if r.id == 0 {
		r.exists("last.ckpt")
	}
	if err := r.barrier(); err != nil {
		return err
	}
	if r.id == 0 {
		if st, err := os.Lstat(r.at("last.ckpt")); err == nil && (st.Mode()&fs.ModeSymlink != 0 || st.Mode().IsRegular()) {
			if err := r.remove("last.ckpt"); err != nil {
				return err
			}
		}
		if err := r.symlink(name, "last.ckpt"); err != nil {
			return err
		}
	}
	return r.barrier()
}

// lightningFileSave is Strategy.save_checkpoint on rank 0 through
// TorchCheckpointIO: makedirs of the directory, then _atomic_save —
// torch.save to memory, written to a mkstemp file in TMPDIR, moved into
// place by shutil.move (rename fails across file systems: copy2, that is
// open "wb" and sendfile, the kernel cutting it into 1 MiB FUSE writes;
// then utime and chmod from the temporary file, which is 0600; then its
// unlink).
func lightningFileSave(r *rank, step int) error {
	if r.id != 0 {
		return nil
	}
	if err := r.makedirs("."); err != nil {
		return err
	}
	name := lightningName(step)
	data := r.payload(name, step, 2<<20+4096)
	tmp, err := os.CreateTemp(r.job.tmp, "tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// shutil.move renames when it can (TMPDIR on the same file system, as in
	// the reference run), and copies across file systems.
	if err := os.Rename(tmp.Name(), r.at(name)); err == nil {
		r.job.put(name, modelEntry{sum: sha256hex(data)})
		return nil
	} else if !isCrossDevice(err) {
		return err
	}
	if err := r.write(name, data, 1<<20, false); err != nil {
		return err
	}
	st, err := os.Stat(tmp.Name())
	if err != nil {
		return err
	}
	if err := os.Chtimes(r.at(name), time.Now(), st.ModTime()); err != nil {
		return err
	}
	if err := os.Chmod(r.at(name), st.Mode().Perm()); err != nil {
		return err
	}
	return os.Remove(tmp.Name())
}

// isCrossDevice tells whether a rename failed with EXDEV.
func isCrossDevice(err error) bool {
	var le *os.LinkError
	return errors.As(err, &le) && strings.Contains(le.Err.Error(), "cross-device")
}

// lightningShardedSave is FSDPStrategy.save_checkpoint with
// state_dict_type="sharded": the path broadcast; every rank checks it and
// makes it; DCP's save of the model and optimizer shards (every rank makes
// the directory again and looks for .metadata, the plan's collective, a
// file per rank fsync'd, the write collective, the coordinator's
// .metadata, the result's broadcast); rank 0 torch.saves the rest as
// meta.pt.
func lightningShardedSave(r *rank, step int) error {
	dir := lightningName(step)
	if err := r.barrier(); err != nil { // self.broadcast(filepath)
		return err
	}
	if st, err := os.Stat(r.at(dir)); err == nil && st.Mode().IsRegular() {
		if err := r.remove(dir); err != nil {
			return err
		}
	}
	if err := r.makedirs(dir); err != nil {
		return err
	}
	if err := r.makedirs(dir); err != nil { // FileSystemWriter.prepare_local_plan
		return err
	}
	r.exists(path.Join(dir, ".metadata"))
	if err := r.barrier(); err != nil {
		return err
	}
	shard := path.Join(dir, fmt.Sprintf("__%d_0.distcp", r.id))
	if err := r.write(shard, r.payload(shard, step, 384<<10+r.id*512), 64<<10, true); err != nil {
		return err
	}
	if err := r.barrier(); err != nil {
		return err
	}
	if r.id == 0 {
		var shards []string
		for i := range r.world {
			shards = append(shards, fmt.Sprintf("__%d_0.distcp", i))
		}
		if err := dcpFinish(r, dir, shards); err != nil {
			return err
		}
	}
	if err := r.barrier(); err != nil {
		return err
	}
	if r.id == 0 {
		meta := path.Join(dir, "meta.pt")
		return r.write(meta, r.payload(meta, step, 24<<10), 24<<10, false)
	}
	return nil
}

// lightningLastName is _find_last_checkpoints' test of a name: a .ckpt
// whose stem matches ^last(-(\d+))?.
var lightningLastName = regexp.MustCompile(`^last(-(\d+))?`)

// lightningLatest is _parse_ckpt_path("last"): every last*.ckpt the
// callback's directory lists, those that exist (through a symlink) by
// modification time, the newest chosen; then the strategy's load reads it
// — the whole file, or for a sharded directory (a directory holding
// meta.pt) DCP's files and meta.pt. The checkpoint found is the one the
// path leads to.
func lightningLatest(root string, rank, world int) (found, error) {
	names, err := os.ReadDir(root)
	if err != nil {
		return found{}, err
	}
	var last string
	var newest time.Time
	for _, e := range names {
		n := e.Name()
		if path.Ext(n) != ".ckpt" || !lightningLastName.MatchString(strings.TrimSuffix(n, ".ckpt")) {
			continue
		}
		st, err := os.Stat(filepath.Join(root, n))
		if err != nil {
			continue
		}
		if last == "" || st.ModTime().After(newest) {
			last, newest = n, st.ModTime()
		}
	}
	if last == "" {
		return found{}, errors.New(`.fit(ckpt_path="last") is set, but there is no last checkpoint available: Lightning would start from scratch`)
	}
	ckpt := last
	if target, err := os.Readlink(filepath.Join(root, last)); err == nil {
		ckpt = path.Clean(target)
	}
	st, err := os.Stat(filepath.Join(root, last))
	if err != nil {
		return found{}, err
	}
	if !st.IsDir() {
		return found{checkpoint: ckpt, reads: []string{last}}, nil
	}
	// _is_sharded_checkpoint, then _distributed_checkpoint_load and
	// torch.load of meta.pt, through last.ckpt; the bytes are those of the
	// directory it points to (last.ckpt itself is checked as a pointer).
	meta := path.Join(ckpt, "meta.pt")
	if st, err := os.Stat(filepath.Join(root, meta)); err != nil || !st.Mode().IsRegular() {
		return found{}, fmt.Errorf("%s is a directory without meta.pt (%v): not a sharded checkpoint", last, err)
	}
	reads, err := dcpReads(root, ckpt)
	if err != nil {
		return found{}, err
	}
	return found{checkpoint: ckpt, reads: append(reads, meta)}, nil
}
