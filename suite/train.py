"""Training: AdamW, linear warmup then cosine decay, gradient clipping, loss on answer spans.

Batches are generated from the task with a generator seeded by (seed, step), so a run resumed
from a checkpoint sees exactly the batches it would have seen, and the same seed gives the
same metrics on the CPU. The GPU recipe adds bf16 autocast, ``torch.compile`` and fused AdamW;
it refuses to start on a machine without CUDA.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
from tqdm.auto import tqdm

from suite import distributed
from suite.batch import make_batch
from suite.checkpoint import resume, save_checkpoint
from suite.step import train_step
from suite.spec import RunSpec
from tasks.base import PAD_ID


@dataclass
class TrainResult:
    status: str  # ok | diverged
    steps_done: int
    final_loss: float
    wall_s: float
    resumed_from: int = 0
    history: list = field(default_factory=list)
    batch_s: float = 0.0  # of wall_s, the time spent generating batches


def lr_at(step: int, spec: RunSpec) -> float:
    """Multiplier on the peak learning rate: linear warmup, then cosine to ``min_lr_ratio``."""
    t = spec.train
    if step < t.warmup:
        return (step + 1) / t.warmup
    progress = (step - t.warmup) / max(1, t.steps - t.warmup)
    return t.min_lr_ratio + (1 - t.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def resolve_device(spec: RunSpec) -> torch.device:
    if spec.train.device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(
            f"train.device={spec.train.device!r} (recipe {spec.train.name!r}) needs a CUDA GPU and none is "
            "available; use train=cpu on this machine"
        )
    return torch.device(spec.train.device)


def build_optimizer(model, spec: RunSpec, device: torch.device):
    t = spec.train
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = t.fused_optimizer and device.type == "cuda"
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), fused=fused)


def train(
    model,
    spec: RunSpec,
    tasks,
    *,
    ckpt_path: Optional[Path] = None,
    ckpt_every: int = 0,
    log: Optional[Callable[[dict, int], None]] = None,
    log_every: int = 10,
    progress: bool = True,
    on_step: Optional[Callable[[int], None]] = None,
) -> TrainResult:
    t = spec.train
    device = resolve_device(spec)
    model.to(device).train()
    rows = distributed.share(t.batch_size)  # all rows, or this process's share under torchrun
    n_procs = t.batch_size // (rows.stop - rows.start)
    optimizer, start = resume(ckpt_path, model, lambda: build_optimizer(model, spec, device))
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high")  # TF32 for what runs outside the bf16 autocast
    ddp = distributed.wrap(model, device)
    if t.compile:
        torch.compiler.reset()  # each run starts with an empty cache: the recompile limit counts per run
    step_fn = torch.compile(ddp) if t.compile else ddp
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=t.precision == "bf16")

    t0 = time.perf_counter()
    bar = tqdm(range(start, t.steps), initial=start, total=t.steps, disable=not progress,
               desc=f"train {spec.model.pattern}/{spec.taskset}", leave=False, dynamic_ncols=True)
    loss_value, history, tokens_seen, batch_s = float("nan"), [], 0, 0.0
    params = list(model.parameters())
    for step in bar:
        rng = np.random.default_rng([spec.seed, step])
        tb = time.perf_counter()
        tokens, mask = make_batch(tasks, rng, t.seq_len, t.batch_size, t.min_len)
        batch_s += time.perf_counter() - tb
        tokens, mask = tokens.to(device), mask.to(device)
        if t.loss_on == "all":
            mask = tokens != PAD_ID
        scored = mask[:, 1:].sum()  # over the global batch, kept on the device (no host sync)
        tokens, mask = tokens[rows], mask[rows]
        for group in optimizer.param_groups:
            group["lr"] = t.lr * lr_at(step, spec)
        logged = step % log_every == 0 or step == t.steps - 1
        out = train_step(step_fn, optimizer, params, tokens, mask, grad_clip=t.grad_clip,
                         denominator=scored / n_procs, autocast=autocast, reduce=distributed.mean,
                         check=logged or device.type == "cpu")  # no host sync on a GPU between log steps
        if out.stopped:
            bar.close()
            return TrainResult("diverged", step, out.loss_value, time.perf_counter() - t0, start, history, batch_s)
        tokens_seen += tokens.numel() * n_procs
        if logged:
            tok_s = tokens_seen / max(1e-9, time.perf_counter() - t0)
            loss_value = out.loss_value
            bar.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{tok_s:,.0f}")
            record = {"train/loss": loss_value, "train/lr": optimizer.param_groups[0]["lr"],
                      "train/grad_norm": float(out.grad_norm), "train/tokens_per_s": tok_s}
            history.append({"step": step, **record})
            if log is not None:
                log(record, step)
        if on_step is not None:
            on_step(step + 1)
        if (ckpt_path is not None and ckpt_every and (step + 1) % ckpt_every == 0 and step + 1 < t.steps
                and distributed.is_main()):
            save_checkpoint(ckpt_path, model, optimizer, step + 1)
    bar.close()
    return TrainResult("ok", t.steps, loss_value, time.perf_counter() - t0, start, history, batch_s)
