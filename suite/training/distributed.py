"""One run across processes: ``torchrun --nproc_per_node N -m suite.run ...``.

torchrun sets ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``; each process builds the same model from
the same seed and generates the same global batch, keeps its own contiguous share of the rows,
and DistributedDataParallel averages the gradients (NCCL on GPUs, Gloo on the CPU). Rank 0 alone
decides whether the run is already stored, writes checkpoints, evaluates, logs and writes the
result file. Without torchrun (``WORLD_SIZE`` unset or 1) every function here is a no-op.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))


def is_main() -> bool:
    return rank() == 0


def active() -> bool:
    return dist.is_initialized() and dist.get_world_size() > 1


def init(device: torch.device) -> None:
    """Join the process group torchrun prepared (once); NCCL for CUDA, Gloo otherwise."""
    if world_size() <= 1 or dist.is_initialized():
        return
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def agree(value):
    """Rank 0's ``value``, on every rank (any picklable object)."""
    if not active():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def mean(value: torch.Tensor) -> torch.Tensor:
    """The mean of ``value`` over ranks (a detached copy)."""
    value = value.detach().clone()
    if active():
        dist.all_reduce(value)
        value /= dist.get_world_size()
    return value


def share(batch_size: int) -> slice:
    """This rank's contiguous rows of a global batch; the batch must split evenly."""
    n = dist.get_world_size() if active() else 1
    if batch_size % n:
        raise ValueError(f"train.batch_size={batch_size} does not split over {n} processes; "
                         f"use a multiple of {n}")
    per = batch_size // n
    r = rank() if active() else 0
    return slice(r * per, (r + 1) * per)


def wrap(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """DistributedDataParallel around ``model`` when running under torchrun, else ``model``. A model
    with a training schedule (``n_phases`` > 1) leaves the parameters of the schemes of other phases
    without gradients, which DDP must be told to expect."""
    if not active():
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, find_unused_parameters=getattr(model, "n_phases", 1) > 1)
