package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Megatron-LM's torch_dist checkpoint, replayed from NVIDIA/Megatron-LM at
// core_v0.14.0 (23e00ed): megatron/training/checkpointing.py save_checkpoint
// (sync save, no non-persistent checkpoints) and _load_base_checkpoint,
// read_metadata, _get_checkpoint_format;
// megatron/core/dist_checkpointing/serialization.py save,
// strategies/common.py TorchCommonSaveStrategy.save_common, core.py
// save_config, and strategies/filesystem_async.py FileSystemWriterAsync
// (thread_count 2: two files per rank, each fsync'd, written by forked
// workers), which finishes with PyTorch's FileSystemWriter.finish
// (pytorch/pytorch torch/distributed/checkpoint/filesystem.py at 0140b62:
// .metadata.tmp renamed to .metadata) and prepares with its
// prepare_local_plan (every rank makes the directory). 4 ranks, data
// parallel.
//
// --save is the mount: each save is iter_000000N/ (a dataset under the
// default datasets.match) and rank 0 writes the tracker,
// latest_checkpointed_iteration.txt, at the root after a barrier.
var megatron = framework{
	name:       "megatron",
	env:        []string{"SCRFS_DATASETS_COMPLETE=pointer:latest_checkpointed_iteration.txt"},
	save:       megatronSave,
	latest:     megatronLatest,
	checkpoint: megatronIter,
	dataset:    megatronIter,
	pointers:   []string{megatronTracker},
	victim:     2,
	kill: func(rel string, step int) bool {
		return rel == path.Join(megatronIter(step), "__2_0.distcp")
	},
}

// megatronTracker is get_checkpoint_tracker_filename's file.
const megatronTracker = "latest_checkpointed_iteration.txt"

// megatronIter is get_checkpoint_name(..., return_base_dir=True).
func megatronIter(step int) string { return fmt.Sprintf("iter_%07d", step) }

// megatronShards are the .distcp files every rank writes: FileSystemWriterAsync
// names them f"__{rank}_{i}.distcp", one per writer thread.
func megatronShards(world int) []string {
	var out []string
	for r := range world {
		for i := range 2 {
			out = append(out, fmt.Sprintf("__%d_%d.distcp", r, i))
		}
	}
	return out
}

// dcpMetadata stands in for DCP's pickled Metadata: the relative paths of
// the files that hold the tensors, which is what a load reads it for.
type dcpMetadata struct {
	Files []string `json:"storage_files"`
}

// megatronConfig is save_config's metadata.json, as it is written.
const megatronConfig = `{"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", "common_backend_version": 1}`

// megatronSave is save_checkpoint(iteration, ...) with --ckpt-format
// torch_dist as rank r runs it.
func megatronSave(r *rank, step int) error {
	iter := megatronIter(step)
	// get_rng_state gathers every rank's RNG state.
	if err := r.barrier(); err != nil {
		return err
	}
	if r.id == 0 {
		// ensure_directory_exists(checkpoint_name, check_parent=False),
		// then dist_checkpointing.save lists it (a warning if not empty).
		if err := r.makedirs(iter); err != nil {
			return err
		}
		if _, err := r.listdir(iter); err != nil {
			return err
		}
	}
	// save_preprocess validates the sharding: an all_gather_object.
	if err := r.barrier(); err != nil {
		return err
	}
	// save_common: rank 0 torch.saves common.pt.
	if r.id == 0 {
		if err := r.write(path.Join(iter, "common.pt"), r.payload("common.pt", step, 64<<10), 64<<10, false); err != nil {
			return err
		}
	}
	// The sharded save: prepare_local_plan on every rank (mkdir -p, and
	// whether .metadata exists), then the plan's gather and scatter.
	if err := r.makedirs(iter); err != nil {
		return err
	}
	r.exists(path.Join(iter, ".metadata"))
	if err := r.barrier(); err != nil {
		return err
	}
	// Two forked workers, each writing and fsyncing one file.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			rel := path.Join(iter, fmt.Sprintf("__%d_%d.distcp", r.id, i))
			errs[i] = r.write(rel, r.payload(rel, step, 192<<10+i*4096), 64<<10, true)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The write results are gathered on the coordinator, which finishes:
	// .metadata.tmp written and fsync'd, renamed to .metadata; then the
	// result goes back to every rank.
	if err := r.barrier(); err != nil {
		return err
	}
	if r.id == 0 {
		if err := dcpFinish(r, iter, megatronShards(r.world)); err != nil {
			return err
		}
	}
	if err := r.barrier(); err != nil {
		return err
	}
	// metadata_finalize_fn: rank 0 writes metadata.json; a barrier.
	if r.id == 0 {
		if err := r.writeText(path.Join(iter, "metadata.json"), megatronConfig); err != nil {
			return err
		}
	}
	if err := r.barrier(); err != nil {
		return err
	}
	// "Wait so everyone is done (necessary)", then rank 0's
	// iter_finalize_fn writes the tracker, and a last barrier.
	if err := r.barrier(); err != nil {
		return err
	}
	if r.id == 0 {
		if err := r.writeText(megatronTracker, strconv.Itoa(step)); err != nil {
			return err
		}
	}
	return r.barrier()
}

// dcpFinish is FileSystemWriter.finish on the coordinator: the metadata
// written to .metadata.tmp and fsync'd, an older .metadata removed, and
// the new one renamed into place.
func dcpFinish(r *rank, dir string, shards []string) error {
	b, err := json.Marshal(dcpMetadata{Files: shards})
	if err != nil {
		return err
	}
	tmp := path.Join(dir, ".metadata.tmp")
	if err := r.write(tmp, b, len(b), true); err != nil {
		return err
	}
	if r.exists(path.Join(dir, ".metadata")) {
		if err := r.remove(path.Join(dir, ".metadata")); err != nil {
			return err
		}
	}
	return r.rename(tmp, path.Join(dir, ".metadata"))
}

// dcpReads are the files FileSystemReader reads to load a DCP checkpoint
// in dir: .metadata, then every file it names (a resharded load may need
// any of them).
func dcpReads(root, dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, dir, ".metadata"))
	if err != nil {
		return nil, err
	}
	var md dcpMetadata
	if err := json.Unmarshal(b, &md); err != nil {
		return nil, fmt.Errorf("%s/.metadata: %w", dir, err)
	}
	reads := []string{path.Join(dir, ".metadata")}
	for _, f := range md.Files {
		reads = append(reads, path.Join(dir, f))
	}
	return reads, nil
}

// megatronLatest is load_checkpoint's _load_base_checkpoint finding what to
// load: the tracker's iteration (read_metadata), the format of its
// directory (_get_checkpoint_format: a listing, .metadata, and
// metadata.json through check_is_distributed_checkpoint), then
// load_common_state_dict's common.pt and the sharded load's files.
func megatronLatest(root string, rank, world int) (found, error) {
	tracker := filepath.Join(root, megatronTracker)
	if st, err := os.Stat(tracker); err != nil || !st.Mode().IsRegular() {
		return found{}, fmt.Errorf("could not find the metadata file %s (%v): Megatron would start from random", tracker, err)
	}
	b, err := os.ReadFile(tracker)
	if err != nil {
		return found{}, err
	}
	iteration, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return found{}, fmt.Errorf("ERROR: Invalid metadata file %s: %q", tracker, b)
	}
	iter := megatronIter(iteration)
	if _, err := os.ReadDir(filepath.Join(root, iter)); err != nil {
		return found{}, err
	}
	if _, err := os.Stat(filepath.Join(root, iter, ".metadata")); err != nil {
		return found{}, err
	}
	var config struct {
		Backend string `json:"sharded_backend"`
	}
	b, err = os.ReadFile(filepath.Join(root, iter, "metadata.json"))
	if err == nil {
		err = json.Unmarshal(b, &config)
	}
	if err != nil || config.Backend != "torch_dist" {
		return found{}, fmt.Errorf("%s is not a torch_dist checkpoint: metadata.json %q, %v", iter, b, err)
	}
	reads, err := dcpReads(root, iter)
	if err != nil {
		return found{}, err
	}
	return found{checkpoint: iter, reads: append([]string{path.Join(iter, "metadata.json"), path.Join(iter, "common.pt")}, reads...)}, nil
}
