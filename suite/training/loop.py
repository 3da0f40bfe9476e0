"""Training: AdamW, linear warmup then cosine decay, gradient clipping, loss on answer spans.

Batches are generated from the task with a generator seeded by (seed, step), so a run resumed
from a checkpoint sees exactly the batches it would have seen, and the same seed gives the
same metrics on the CPU. A schedule (``train.schedule``) sets the model's phase from the step
before each one (``TrainSpec.phase_at``), so a resumed run switches where an uninterrupted one
does; the model holds every phase's parameters and the optimizer their state throughout, and
training ends in the last phase, the one evaluated. The GPU recipe adds bf16 autocast,
``torch.compile`` and fused AdamW; it refuses to start on a machine without CUDA.

Training to criterion (``train.until_learned``, with a ``check`` from the caller: the evaluation
stage's ``suite.evaluation.check``): a check after every ``check_every`` steps, at ``steps`` and at
the cap (``TrainSpec.is_check_step``). At and after ``steps`` a passing check ends training; a run
that has not passed trains on at the final learning rate (``lr_at``) up to ``TrainSpec.cap_steps``.
The checks are kept in the result and in each checkpoint, so a resumed run makes the same
decisions and records the same checks as an uninterrupted one. Under torchrun every process
scores the check and rank 0's scores decide, so all processes stop at the same step.
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

from suite.training import distributed
from suite.data.batch import make_batch
from suite.training.checkpoint import resume, save_checkpoint
from suite.training.step import train_step
from suite.config.run_spec import RunSpec
from tasks.base import PAD_ID


@dataclass
class TrainResult:
    status: str  # ok | diverged
    steps_done: int
    final_loss: float
    wall_s: float
    resumed_from: int = 0
    # every logged step of the whole training ({"step", "train/loss", "train/lr", "train/grad_norm",
    # "train/tokens_per_s"}), a resumed run's included: the checkpoint carries the steps before it
    history: list = field(default_factory=list)
    batch_s: float = 0.0  # of wall_s, the time spent generating batches
    # wall_s and batch_s count the whole training: a process resumed from a checkpoint adds the
    # time the checkpoint recorded (``spent``) to its own; earlier_s is that recorded wall time
    earlier_s: float = 0.0
    # training to criterion: every check made, {"step": steps done, "scores": {task: score}}, in order
    checks: list = field(default_factory=list)


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
    return torch.optim.AdamW(groups, lr=t.lr, betas=t.betas, fused=fused)


@dataclass
class _Setup:
    """What a run holds between steps: device, optimizer, the step function and this process's rows."""

    device: torch.device
    optimizer: torch.optim.Optimizer
    start: int  # first step to run (> 0 when resumed from a checkpoint)
    spent: dict  # the training's time before ``start`` (wall_s, batch_s), from the checkpoint
    history: list  # the logged steps before ``start``, from the checkpoint
    checks: list  # the checks made before ``start``, from the checkpoint
    step_fn: Callable
    autocast: torch.autocast
    rows: slice  # this process's rows of the global batch (all rows without torchrun)
    n_procs: int
    params: list


def _setup(model, spec: RunSpec, ckpt_path: Optional[Path], total: int) -> _Setup:
    """Model on its device, the optimizer (restored with the model when a checkpoint exists), DDP
    under torchrun, ``torch.compile`` and bf16 autocast as the recipe asks."""
    t = spec.train
    device = resolve_device(spec)
    model.to(device).train()
    rows = distributed.share(t.batch_size)
    optimizer, start, spent, history, checks = resume(ckpt_path, model, lambda: build_optimizer(model, spec, device),
                                                      spec.run_id, total)
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high")  # TF32 for what runs outside the bf16 autocast
    ddp = distributed.wrap(model, device)
    if t.compile:
        torch.compiler.reset()  # each run starts with an empty cache: the recompile limit counts per run
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=t.precision == "bf16")
    return _Setup(device, optimizer, start, spent, history, checks, torch.compile(ddp) if t.compile else ddp, autocast, rows,
                  t.batch_size // (rows.stop - rows.start), list(model.parameters()))


def _batch(spec: RunSpec, tasks, step: int, run: _Setup):
    """(tokens, mask, scored, seconds): step ``step``'s batch from a generator seeded by (seed, step),
    this process's rows of it, the global count of scored tokens, and the time spent generating it."""
    t = spec.train
    tb = time.perf_counter()
    tokens, mask = make_batch(tasks, np.random.default_rng([spec.seed, step]), t.seq_len, t.batch_size, t.min_len)
    seconds = time.perf_counter() - tb
    tokens, mask = tokens.to(run.device), mask.to(run.device)
    if t.loss_on == "all":
        mask = tokens != PAD_ID
    scored = mask[:, 1:].sum()  # over the global batch, kept on the device (no host sync)
    return tokens[run.rows], mask[run.rows], scored, seconds


class _Meter:
    """Progress bar, logged history, tokens seen and batch time of one training run."""

    def __init__(self, spec: RunSpec, start: int, spent: dict, history: list, progress: bool,
                 log: Optional[Callable[[dict, int], None]], label: Optional[str] = None, total: Optional[int] = None,
                 planned: Optional[int] = None):
        """``total``: the most steps the run may train (the cap, training to criterion); ``planned``:
        the steps the bar shows until the run extends past them (``extend``)."""
        self.t0, self.start, self.log, self.before = time.perf_counter(), start, log, spent
        total = spec.train.steps if total is None else total
        planned = max(start, spec.train.steps if planned is None else planned)
        self.steps = range(start, total)
        self.bar = tqdm(disable=not progress, initial=start, total=planned,
                        desc=f"train {label or f'{spec.model.pattern}/{spec.taskset} seed {spec.seed}'}", leave=False, dynamic_ncols=True)
        self.loss_value, self.history, self.tokens_seen, self.batch_s = float("nan"), list(history), 0, 0.0

    def extend(self, total: int) -> None:
        """The bar's total, once a run trains past its planned steps."""
        if self.bar.total != total:
            self.bar.total = total
            self.bar.refresh()

    def record(self, step: int, out, lr: float) -> None:
        """Log step ``step``: loss, learning rate, gradient norm and tokens per second so far."""
        tok_s = self.tokens_seen / max(1e-9, time.perf_counter() - self.t0)
        self.loss_value = out.loss_value
        self.bar.set_postfix(loss=f"{self.loss_value:.3f}", tok_s=f"{tok_s:,.0f}")
        record = {"train/loss": self.loss_value, "train/lr": lr, "train/grad_norm": float(out.grad_norm),
                  "train/tokens_per_s": tok_s}
        self.history.append({"step": step, **record})
        if self.log is not None:
            self.log(record, step)

    def spent(self) -> dict:
        """The training's time so far, earlier processes' included: what a checkpoint records."""
        return {"wall_s": time.perf_counter() - self.t0 + self.before["wall_s"],
                "batch_s": self.batch_s + self.before["batch_s"]}

    def result(self, status: str, steps_done: int, final_loss: float, checks: list) -> TrainResult:
        self.bar.close()
        spent = self.spent()
        return TrainResult(status, steps_done, final_loss, spent["wall_s"], self.start, self.history, spent["batch_s"],
                           self.before["wall_s"], [dict(c) for c in checks])


def _set_lr(optimizer, spec: RunSpec, step: int) -> None:
    for group in optimizer.param_groups:
        group["lr"] = spec.train.lr * lr_at(step, spec)


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
    label: Optional[str] = None,
    check=None,
    on_extend: Optional[Callable[[int], None]] = None,
) -> TrainResult:
    """Train ``model`` on ``tasks`` for ``spec.train.steps`` steps, resuming from ``ckpt_path`` when a
    checkpoint is there and saving one every ``ckpt_every`` steps; ``log(metrics, step)`` gets every
    ``log_every``-th step and the last; ``on_step(n)`` is called after each of the n steps done;
    ``label`` names the run on the progress bar (``suite.progress.run_label``).

    ``check`` (training to criterion, ``suite.evaluation.check.Check``, or None for exactly ``steps``
    steps): ``check(model) -> {task: score}`` and ``check.passed(scores)``; training stops at the first
    passing check at or after ``steps``, else at ``TrainSpec.cap_steps``. ``on_extend(total)`` is
    called once training goes on past ``steps``, with the most steps it may now take."""
    t = spec.train
    total = t.cap_steps if check is not None else t.steps
    run = _setup(model, spec, ckpt_path, total)
    checks = list(run.checks)
    extended = check is not None and run.start >= t.steps
    meter = _Meter(spec, run.start, run.spent, run.history, progress, log, label, total,
                   total if extended else t.steps)
    if extended:
        _extend(meter, total, on_extend)
    for step in meter.steps:
        done = step + 1
        checked = check is not None and t.is_check_step(done)
        logged = step % log_every == 0 or step == t.steps - 1
        out, n_tokens = _step(model, spec, tasks, step, run, meter, sync=logged or checked)
        if out.stopped:
            _last_phase(model, spec)
            return meter.result("diverged", step, out.loss_value, checks)
        meter.tokens_seen += n_tokens
        meter.bar.update()
        stop = done == total
        if checked:
            stop = _passed(check, model, done, checks, t.steps) or stop
            if done == t.steps and not stop:
                _extend(meter, total, on_extend)
        if logged or stop:
            meter.record(step, out, run.optimizer.param_groups[0]["lr"])
        if on_step is not None:
            on_step(done)
        if stop:
            break
        if ckpt_path is not None and ckpt_every and done % ckpt_every == 0 and distributed.is_main():
            save_checkpoint(ckpt_path, model, run.optimizer, done, spec.run_id, meter.spent(), meter.history, checks)
    _last_phase(model, spec)
    return meter.result("ok", done if meter.steps else run.start, meter.loss_value, checks)


def _step(model, spec: RunSpec, tasks, step: int, run: _Setup, meter: _Meter, sync: bool):
    """Step ``step``: the schedule's phase, the batch, the learning rate and one optimizer step;
    (its ``StepOutput``, the tokens it trained on across processes). ``sync``: read the loss back
    (a log or check step; every step on the CPU, where it costs nothing)."""
    t = spec.train
    if t.schedule:
        model.set_phase(t.phase_at(step))
    tokens, mask, scored, seconds = _batch(spec, tasks, step, run)
    meter.batch_s += seconds
    _set_lr(run.optimizer, spec, step)
    out = train_step(run.step_fn, run.optimizer, run.params, tokens, mask, grad_clip=t.grad_clip,
                     denominator=scored / run.n_procs, autocast=run.autocast, reduce=distributed.mean,
                     check=sync or run.device.type == "cpu")  # no host sync on a GPU between log steps
    return out, tokens.numel() * run.n_procs


def _passed(check, model, done: int, checks: list, steps: int) -> bool:
    """Make the check after ``done`` steps and record it; whether it ends training (a pass at or
    after ``steps``). Rank 0's scores decide, so every process stops at the same step."""
    scores = distributed.agree(check(model))
    checks.append({"step": done, "scores": scores})
    return done >= steps and check.passed(scores)


def _extend(meter: _Meter, total: int, on_extend: Optional[Callable[[int], None]]) -> None:
    """Training goes on past ``steps``: the bar and ``on_extend`` learn the most steps it may take."""
    meter.extend(total)
    if on_extend is not None:
        on_extend(total)


def _last_phase(model, spec: RunSpec) -> None:
    """A scheduled model back in its last phase, the one it is evaluated with."""
    if spec.train.schedule:
        model.set_phase(len(spec.train.schedule))
