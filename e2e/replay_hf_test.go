package e2e

import (
	"cmp"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// The Hugging Face Trainer's checkpoints, replayed from
// huggingface/transformers src/transformers/trainer.py at 000945a
// (Trainer._save_checkpoint, save_model, _save, _save_optimizer_and_scheduler,
// _save_rng_state, _rotate_checkpoints, _sorted_checkpoints; the resume's
// _load_from_checkpoint, _load_optimizer_and_scheduler, _load_rng_state),
// src/transformers/modeling_utils.py at 040ba14
// (PreTrainedModel.save_pretrained: config.json, a listing to clean stale
// shards, the safetensors file) and src/transformers/trainer_utils.py at
// 007360d (get_last_checkpoint, which train(resume_from_checkpoint=True)
// and the example scripts call).
// DDP over 4 processes, a PreTrainedModel saved with safetensors,
// save_total_limit=2.
//
// output_dir is the mount; each save is checkpoint-N/, a dataset by the
// guide's datasets.match, which makes nothing else at the root one (so
// logging_dir goes outside the mount). Rank 0 writes the model, optimizer,
// scheduler and trainer state, every rank its RNG state, with no barrier
// between them and none at the end: only the training steps that follow
// order one save before the next, so the checkpoint is complete when the
// next one starts (next), or when nothing was written for a while (idle)
// for the last one — 5 s here, for a fast test, where the guide says 2m.
var hfTrainer = framework{
	name:       "hf-trainer",
	env:        []string{"SCRFS_DATASETS_MATCH=" + hfMatch, "SCRFS_DATASETS_COMPLETE=next,idle:5s"},
	save:       hfSave,
	latest:     hfLatest,
	checkpoint: hfCheckpoint,
	dataset:    hfCheckpoint,
	victim:     2,
	kill: func(rel string, step int) bool {
		return rel == path.Join(hfCheckpoint(step), "rng_state_2.pth")
	},
}

// hfMatch makes checkpoint-N/ a dataset and nothing else at the root.
const hfMatch = `^(?P<dataset>checkpoint-\d+)/`

// hfCheckpoint is f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}".
func hfCheckpoint(step int) string { return fmt.Sprintf("checkpoint-%d", step) }

// hfSaveTotalLimit is TrainingArguments.save_total_limit.
const hfSaveTotalLimit = 2

// hfSave is Trainer._save_checkpoint(model, trial=None) as process r.id
// runs it.
func hfSave(r *rank, step int) error {
	dir := hfCheckpoint(step)
	// store_flos: distributed_broadcast_scalars, an all_gather.
	if err := r.barrier(); err != nil {
		return err
	}
	if r.id == 0 {
		// save_model → _save: makedirs; save_pretrained (makedirs,
		// config.json, a listing to clean stale shards, model.safetensors);
		// training_args.bin; then _save_optimizer_and_scheduler.
		if err := r.makedirs(dir); err != nil {
			return err
		}
		if err := r.makedirs(dir); err != nil {
			return err
		}
		if err := r.writeText(path.Join(dir, "config.json"), `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256}`+"\n"); err != nil {
			return err
		}
		if _, err := r.listdir(dir); err != nil {
			return err
		}
		for _, f := range []struct {
			name string
			size int
		}{{"model.safetensors", 1 << 20}, {"training_args.bin", 6 << 10}, {"optimizer.pt", 768 << 10}, {"scheduler.pt", 2 << 10}} {
			rel := path.Join(dir, f.name)
			if err := r.write(rel, r.payload(rel, step, f.size), 64<<10, false); err != nil {
				return err
			}
		}
	}
	// _save_rng_state on every process: "A process can arrive here before
	// the process 0 has a chance to save the model": makedirs, then
	// rng_state_{process_index}.pth.
	if err := r.makedirs(dir); err != nil {
		return err
	}
	rng := path.Join(dir, fmt.Sprintf("rng_state_%d.pth", r.id))
	if err := r.write(rng, r.payload(rng, step, 16<<10), 4<<10, false); err != nil {
		return err
	}
	if r.id != 0 {
		return nil
	}
	// The trainer state, then the rotation.
	if err := r.writeText(path.Join(dir, "trainer_state.json"), fmt.Sprintf(`{"global_step": %d, "best_model_checkpoint": null}`+"\n", step)); err != nil {
		return err
	}
	return hfRotate(r)
}

// hfCheckpointName is _sorted_checkpoints' numeric order.
var hfCheckpointName = regexp.MustCompile(`.*checkpoint-([0-9]+)`)

// hfRotate is _rotate_checkpoints(use_mtime=True): the checkpoint-*
// directories by modification time — by number when their times lie
// within a second, "mtime may not be reliable on this filesystem" — and
// all but the newest save_total_limit removed with
// shutil.rmtree(ignore_errors=True).
func hfRotate(r *rank) error {
	glob, err := filepath.Glob(r.at("checkpoint-*"))
	if err != nil {
		return err
	}
	type ordered struct {
		key  float64
		name string
	}
	var byTime, byNumber []ordered
	for _, p := range glob {
		st, err := os.Stat(p)
		if err != nil || !st.IsDir() {
			continue
		}
		name := filepath.Base(p)
		byTime = append(byTime, ordered{float64(st.ModTime().UnixNano()) / float64(time.Second), name})
		if m := hfCheckpointName.FindStringSubmatch(name); m != nil {
			n, _ := strconv.Atoi(m[1])
			byNumber = append(byNumber, ordered{float64(n), name})
		}
	}
	// Python sorts (key, path) tuples.
	less := func(a, b ordered) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	}
	slices.SortFunc(byTime, less)
	sorted := byTime
	if len(byTime) > 1 && byTime[len(byTime)-1].key-byTime[0].key < 1 {
		slices.SortFunc(byNumber, less)
		sorted = byNumber
	}
	for i := 0; i < len(sorted)-hfSaveTotalLimit; i++ {
		r.rmtree(sorted[i].name, true)
	}
	return nil
}

// hfCheckpointDir is trainer_utils' _re_checkpoint.
var hfCheckpointDir = regexp.MustCompile(`^checkpoint\-(\d+)$`)

// hfLatest is get_last_checkpoint(output_dir) — the directories named
// checkpoint-N, the largest N — and what the resume reads from it on
// process rank: the config and weights, the optimizer and scheduler, the
// trainer state, and its RNG state (rng_state_{process_index}.pth, a
// warning if missing).
func hfLatest(root string, rank, world int) (found, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return found{}, err
	}
	best, last := -1, ""
	for _, e := range entries {
		m := hfCheckpointDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if st, err := os.Stat(filepath.Join(root, e.Name())); err != nil || !st.IsDir() {
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n > best {
			best, last = n, e.Name()
		}
	}
	if last == "" {
		return found{}, fmt.Errorf("get_last_checkpoint(%s) found no checkpoint: the Trainer would start from scratch", root)
	}
	reads := []string{"config.json", "model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json"}
	if world > 1 {
		reads = append(reads, fmt.Sprintf("rng_state_%d.pth", rank))
	}
	for i, f := range reads {
		reads[i] = path.Join(last, f)
	}
	return found{checkpoint: last, reads: reads}, nil
}
