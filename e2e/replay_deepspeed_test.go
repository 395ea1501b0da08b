package e2e

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// DeepSpeed's save_checkpoint and load_checkpoint(tag=None), replayed from
// deepspeedai/DeepSpeed deepspeed/runtime/engine.py at edaa722 (v0.19.5-27):
// DeepSpeedEngine.save_checkpoint, _create_checkpoint_file,
// _save_checkpoint, _create_zero_checkpoint_files, _save_zero_checkpoint,
// _copy_recovery_script and load_checkpoint, _get_all_ckpt_names,
// _get_all_zero_checkpoint_names; the files go through
// runtime/checkpoint_engine/torch_checkpoint_engine.py (torch.save) and
// checkpoint_engine.py (makedirs). ZeRO stage 2, data parallel over the 4
// ranks (no model or pipeline parallelism, no MoE), fp32 optimizer states.
//
// save_dir is the mount: each save is global_stepN/ (a dataset under the
// default datasets.match), and rank 0 keeps two files at the root,
// zero_to_fp32.py (copied there on every save, from inside
// _save_zero_checkpoint) and latest (the tag, written last).
var deepspeed = framework{
	name:       "deepspeed",
	env:        []string{"SCRFS_DATASETS_COMPLETE=pointer:latest"},
	save:       deepspeedSave,
	latest:     deepspeedLatest,
	checkpoint: deepspeedTag,
	dataset:    deepspeedTag,
	pointers:   []string{"latest", "zero_to_fp32.py"},
	victim:     2,
	kill: func(rel string, step int) bool {
		return rel == path.Join(deepspeedTag(step), deepspeedZeroFile(2))
	},
}

// deepspeedTag is save_checkpoint's default tag, f"global_step{self.global_steps}".
func deepspeedTag(step int) string { return fmt.Sprintf("global_step%d", step) }

// deepspeedZeroFile is _get_rank_zero_ckpt_name's name of data-parallel
// rank dp's optimizer partition (model-parallel rank 0, not bf16).
func deepspeedZeroFile(dp int) string {
	return fmt.Sprintf("zero_pp_rank_%d_mp_rank_00_optim_states.pt", dp)
}

// deepspeedModelFile is _get_ckpt_name's model states file (ZeRO < 3).
const deepspeedModelFile = "mp_rank_00_model_states.pt"

// deepspeedSave is DeepSpeedEngine.save_checkpoint(save_dir, tag=None) as
// rank r runs it.
func deepspeedSave(r *rank, step int) error {
	tag := deepspeedTag(step)
	// Rank 0 ensures save_dir exists; dist.barrier().
	if r.id == 0 {
		if err := r.makedirs("."); err != nil {
			return err
		}
	}
	if err := r.barrier(); err != nil {
		return err
	}
	// _checkpoint_tag_validation: all_reduce of the tag's hash.
	if err := r.barrier(); err != nil {
		return err
	}
	// _create_checkpoint_file(save_dir, tag, False): every rank makes the
	// tag's directory, at once.
	if err := r.makedirs(tag); err != nil {
		return err
	}
	// _save_checkpoint: the data-parallel writer (rank 0) torch.saves the
	// model states.
	if r.id == 0 {
		if err := r.write(path.Join(tag, deepspeedModelFile), r.payload(deepspeedModelFile, step, 768<<10), 64<<10, false); err != nil {
			return err
		}
	}
	// _create_zero_checkpoint_files: the directory again, on every rank.
	if err := r.makedirs(tag); err != nil {
		return err
	}
	// _save_zero_checkpoint: each rank torch.saves its optimizer partition;
	// rank 0 then copies the recovery script to save_dir (shutil.copyfile)
	// and makes it executable.
	zero := path.Join(tag, deepspeedZeroFile(r.id))
	if err := r.write(zero, r.payload(zero, step, 256<<10+r.id*1000), 64<<10, false); err != nil {
		return err
	}
	if r.id != 0 {
		r.signal(fmt.Sprintf("zero %d", r.id))
	} else {
		// Nothing in DeepSpeed orders the other ranks' partitions before
		// rank 0's root files: no barrier comes before the final one. The
		// replay takes the common order, every partition written before
		// rank 0 goes on (it wrote the model states besides its own); a
		// rank slower than that has its file refused once latest completed
		// the checkpoint (see the guide's DeepSpeed section).
		for i := 1; i < r.world; i++ {
			if err := r.await(fmt.Sprintf("zero %d", i)); err != nil {
				return err
			}
		}
		script := r.payload("zero_to_fp32.py", 0, 30_000) // the same script every time
		if err := r.write("zero_to_fp32.py", script, len(script), false); err != nil {
			return err
		}
		if err := r.chmodExec("zero_to_fp32.py"); err != nil {
			return err
		}
		// checkpoint_engine.commit, then rank 0 writes the tag to latest.
		if err := r.writeText("latest", tag); err != nil {
			return err
		}
	}
	return r.barrier()
}

// chmodExec is os.chmod(p, os.stat(p).st_mode | stat.S_IEXEC).
func (r *rank) chmodExec(rel string) error {
	st, err := os.Stat(r.at(rel))
	if err != nil {
		return err
	}
	return os.Chmod(r.at(rel), st.Mode()|0o100)
}

// deepspeedLatest is DeepSpeedEngine.load_checkpoint(load_dir, tag=None)
// finding what to load: the tag in latest, the model states files
// _get_all_ckpt_names globs, and the ZeRO partitions of the checkpoint's
// data-parallel world (4, as its model states record it), of which rank
// rank loads its own. (On another world size ZeRO refuses to load the
// optimizer states; the files it would open are the same.)
func deepspeedLatest(root string, rank, world int) (found, error) {
	const savedWorld = 4
	latest := filepath.Join(root, "latest")
	if st, err := os.Stat(latest); err != nil || !st.Mode().IsRegular() {
		return found{}, fmt.Errorf("Unable to find latest file at %s (%v): DeepSpeed would not load any checkpoint", latest, err)
	}
	b, err := os.ReadFile(latest)
	if err != nil {
		return found{}, err
	}
	tag := strings.TrimSpace(string(b))
	models, err := filepath.Glob(filepath.Join(root, tag, "mp_rank_*_model_states.pt"))
	if err != nil || len(models) == 0 {
		return found{}, fmt.Errorf("latest names %q, which holds no mp_rank_*_model_states.pt (%v)", tag, err)
	}
	slices.Sort(models)
	f := found{checkpoint: tag}
	for _, m := range models {
		rel, _ := filepath.Rel(root, m)
		f.reads = append(f.reads, rel)
	}
	for dp := range savedWorld {
		zero := path.Join(tag, deepspeedZeroFile(dp))
		if _, err := os.Stat(filepath.Join(root, zero)); err != nil {
			return found{}, fmt.Errorf("ZeRO partition of rank %d: %w", dp, err)
		}
		if dp == rank {
			f.reads = append(f.reads, zero)
		}
	}
	return f, nil
}
