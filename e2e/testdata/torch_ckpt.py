"""One rank of a PyTorch checkpoint round trip through scrfs mounts.

Usage: torch_ckpt.py PHASE RANK WORLD PORT DIR

DIR is the checkpoint directory as this rank sees it (inside its node's
mount). PHASE is one of
  dcp-save   save a state dict with torch's distributed checkpoint (DCP):
             a tensor sharded over the WORLD ranks, a replicated tensor
             (written once), a scalar
  dcp-load   load it into a state dict sharded over WORLD ranks (another
             WORLD than the save reshards: every rank reads slices of
             other ranks' files) and check every value; prints
             "load_seconds S", the load alone between two barriers
  save       torch.save this rank's object into DIR/rank_RANK.pt
  load       torch.load every rank's object (0..3) from DIR and check it
Prints "ok" on success; any failure raises. TORCH_CKPT_ROWS in the
environment sets the rows of 4096 float32 of the sharded tensor (default
64: 1 MiB); bench/nsbench saves and loads larger ones.
"""

import copy
import dataclasses
import os
import sys
import time


def allow_mutable_dataclass_defaults():
    """Debian's torch 1.13 declares dataclass fields with mutable defaults,
    which Python 3.11 refuses at import; turn such defaults into
    default_factory, which is what they mean. Nothing of torch's I/O is
    touched."""
    original = dataclasses._get_field

    def get_field(cls, name, type_, *rest):
        default = cls.__dict__.get(name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            value = default.default
            if value is not dataclasses.MISSING and type(value).__hash__ is None:
                default.default = dataclasses.MISSING
                default.default_factory = lambda v=value: copy.copy(v)
        elif default is not dataclasses.MISSING and type(default).__hash__ is None:
            setattr(cls, name, dataclasses.field(default_factory=lambda v=default: copy.copy(v)))
        return original(cls, name, type_, *rest)

    dataclasses._get_field = get_field


allow_mutable_dataclass_defaults()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

ROWS = int(os.environ.get("TORCH_CKPT_ROWS", "64"))  # the sharded tensor: ROWS rows
COLS = 4096  # of 4096 float32


def rows(first, n):
    return torch.arange(first * COLS, (first + n) * COLS, dtype=torch.float32).reshape(n, COLS)


def replicated():
    return torch.arange(1 << 18, dtype=torch.float32) * 3


def sharded(world, fill):
    from torch.distributed._shard import sharded_tensor
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec

    spec = ChunkShardingSpec(dim=0, placements=[f"rank:{r}/cpu" for r in range(world)])
    st = sharded_tensor.empty(spec, ROWS, COLS)
    for shard in st.local_shards():
        first, n = shard.metadata.shard_offsets[0], shard.tensor.shape[0]
        if fill:
            shard.tensor.copy_(rows(first, n))
        else:
            shard.tensor.zero_()
    return st


def dcp(phase, rank, world, path):
    import torch.distributed._shard.checkpoint as ckpt

    if phase == "dcp-save":
        state = {"sharded": sharded(world, True), "replicated": replicated(), "step": torch.tensor(200)}
        ckpt.save_state_dict(state, ckpt.FileSystemWriter(path))
        return
    state = {"sharded": sharded(world, False), "replicated": torch.zeros(1 << 18), "step": torch.tensor(0)}
    dist.barrier()
    start = time.monotonic()
    ckpt.load_state_dict(state, ckpt.FileSystemReader(path))
    dist.barrier()
    print(f"load_seconds {time.monotonic() - start:.6f}")
    for shard in state["sharded"].local_shards():
        first, n = shard.metadata.shard_offsets[0], shard.tensor.shape[0]
        if not torch.equal(shard.tensor, rows(first, n)):
            raise SystemExit(f"rank {rank}: rows {first}..{first + n} differ from what was saved")
    if not torch.equal(state["replicated"], replicated()):
        raise SystemExit(f"rank {rank}: the replicated tensor differs")
    if int(state["step"]) != 200:
        raise SystemExit(f"rank {rank}: step {int(state['step'])}, saved 200")


def plain(phase, rank, path):
    def obj(r):
        return {"rank": r, "weights": torch.arange(100_000, dtype=torch.float64) * (r + 1)}

    if phase == "save":
        torch.save(obj(rank), os.path.join(path, f"rank_{rank}.pt"))
        return
    for r in range(4):
        got = torch.load(os.path.join(path, f"rank_{r}.pt"))
        want = obj(r)
        if got["rank"] != r or not torch.equal(got["weights"], want["weights"]):
            raise SystemExit(f"rank {rank}: rank_{r}.pt differs from what rank {r} saved")


def main():
    phase, rank, world, port, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    if phase in ("save", "load"):
        plain(phase, rank, path)
    else:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        try:
            dcp(phase, rank, world, path)
            dist.barrier()
        finally:
            dist.destroy_process_group()
    print("ok")


main()
