"""The training step a sweep runs, timed against a same-shape Hugging Face Llama put through it,
per step and over a whole stored sweep.

Both models train through ``suite.training.loop.train`` itself: the same batches (a default-sweep task
under the CPU recipe's length protocol), AdamW, gradient clipping, learning-rate schedule and
answer-only loss, on one torch thread as a sweep worker has. Only the model differs, so the
ratio of their training tokens/s (batch generation included) is what a sweep would gain.
"""
from __future__ import annotations

import torch
from torch import nn

import numpy as np

from suite.data.batch import length_range, sample_length
from suite.config.compose import compose_config
from suite.model.lm import PosBenchLM
from suite.config.build import build
from suite.bench.sweep_time import latest_multirun
from suite.training.loop import train

STEPS = {"tiny": 200, "small": 40}  # timed steps per run: a few seconds to tens of seconds each


def hf_llama(model_spec):
    """A randomly initialized ``LlamaForCausalLM`` of the model spec's shape (RoPE, SwiGLU, RMSNorm)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    m = model_spec
    cfg = LlamaConfig(vocab_size=m.vocab_size, hidden_size=m.d_model, intermediate_size=m.d_ff,
                      num_hidden_layers=m.n_layers, num_attention_heads=m.n_heads, num_key_value_heads=m.n_heads,
                      max_position_embeddings=max(4096, m.train_len), rms_norm_eps=m.norm_eps, tie_word_embeddings=False,
                      attn_implementation="sdpa")
    return LlamaForCausalLM(cfg)


class LogitsOnly(nn.Module):
    """A Hugging Face causal LM called as PosBench models are: ``model(tokens) -> logits (B, T, V)``."""

    def __init__(self, hf: nn.Module):
        super().__init__()
        self.hf = hf

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.hf(tokens).logits


def sweep_step_rows(sizes=("tiny", "small"), tasks=("copy", "vt"), steps: dict | None = None,
                    rounds: int = 2) -> list[dict]:
    """Training tokens/s of PosBench (RoPE, full attention) and of the same-shape HF Llama through
    ``train``, per model size and task; the two are timed in turn, ``rounds`` times, each keeping
    its best round."""
    steps = {**STEPS, **(steps or {})}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows = []
    try:
        for size in sizes:
            for task in tasks:
                spec = build(compose_config([f"model={size}", "position=rope", f"task={task}",
                                             f"train.steps={steps[size]}"]))
                makers = {"posbench": lambda: PosBenchLM(spec.model), "hf_llama": lambda: LogitsOnly(hf_llama(spec.model))}
                best = dict.fromkeys(makers, 0.0)
                for _ in range(rounds):
                    for name, make in makers.items():
                        torch.manual_seed(spec.seed)
                        result = train(make(), spec, [t.build() for t in spec.tasks], progress=False,
                                       log_every=steps[size])
                        best[name] = max(best[name], result.history[-1]["train/tokens_per_s"])
                rows += [{"kind": "sweep_step", "model": size, "scheme": "rope", "span": "full", "task": task,
                          "path": name, "tokens_per_s": value, "steps": steps[size]} for name, value in best.items()]
    finally:
        torch.set_num_threads(threads)
    return rows


OPTIMIZERS = {"AdamW (for-loop, the CPU recipe)": {"foreach": False}, "AdamW foreach": {"foreach": True},
              "AdamW fused": {"fused": True}}


def optimizer_rows(size: str = "tiny", task: str = "copy", steps: int = 150, rounds: int = 2) -> list[dict]:
    """The sweep step (``train_step``, one thread, the default sweep's batches) with each AdamW
    implementation torch offers on the CPU, timed in turn; each keeps its best round."""
    from suite.data.batch import make_batch
    from suite.training.step import train_step
    from suite.bench.timing import time_steps

    spec = build(compose_config([f"model={size}", "position=rope", f"task={task}"]))
    t, tasks = spec.train, [task.build() for task in spec.tasks]
    batches = [make_batch(tasks, np.random.default_rng([0, i]), t.seq_len, t.batch_size, t.min_len) for i in range(steps)]
    tokens = sum(b[0].numel() for b in batches)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    best = dict.fromkeys(OPTIMIZERS, float("inf"))
    try:
        for _ in range(rounds):
            for name, kwargs in OPTIMIZERS.items():
                torch.manual_seed(0)
                model = PosBenchLM(spec.model).train()
                params = list(model.parameters())
                opt = torch.optim.AdamW(params, lr=t.lr, **kwargs)
                it = iter(batches * 2)
                seconds = time_steps(lambda: train_step(model, opt, params, *next(it), grad_clip=t.grad_clip), steps)
                best[name] = min(best[name], seconds * steps)
    finally:
        torch.set_num_threads(threads)
    return [{"kind": "optimizer", "model": size, "task": task, "path": name, "tokens_per_s": tokens / seconds,
             "steps": steps} for name, seconds in best.items()]


def training_tokens(spec) -> int:
    """Tokens a run of ``spec`` trains on: its batches' lengths replayed from their seeds (each
    batch draws its length first from the generator seeded by (seed, step), as ``make_batch`` does)."""
    t = spec.train
    lo, hi = length_range(tuple(task.build() for task in spec.tasks), t.seq_len, t.min_len)
    return t.batch_size * sum(sample_length(np.random.default_rng([spec.seed, step]), lo, hi) for step in range(t.steps))


def sweep_level_rows(results_dir, sweep: str = "default", steps: int = 200, threads: int = 2) -> list[dict]:
    """The latest stored multirun of ``sweep``: its training tokens over its wall time (every phase
    included, its parallel jobs on this machine's cores), against the same runs' tokens trained
    one after another by a same-shape HF Llama through ``train`` on ``threads`` threads (the same
    cores), at the tokens/s it reaches on each run's task in ``steps`` timed steps (training only).
    Empty when the store holds no timed multirun of ``sweep``."""
    found = latest_multirun(results_dir, sweep)
    if found is None:
        return []
    record, runs = found
    per_task: dict[str, int] = {}
    model = None
    for run in runs:
        task_names = [t["name"] for t in run["spec"]["tasks"]]
        selector = f"task={task_names[0]}" if len(task_names) == 1 else f"taskset={run['spec']['taskset']}"
        spec = build(compose_config([selector, f"model={run['spec']['model']['name']}", f"seed={run['spec']['seed']}"]))
        if spec.to_dict()["train"] != run["spec"]["train"]:
            raise ValueError(f"run {run.get('run_id')} was trained with settings the default recipe no longer has")
        model = model or spec.model
        per_task[selector] = per_task.get(selector, 0) + training_tokens(spec)
    hf_seconds = 0.0
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for selector, tokens in per_task.items():
            spec = build(compose_config([selector, f"model={model.name}", f"train.steps={steps}"]))
            torch.manual_seed(0)
            result = train(LogitsOnly(hf_llama(spec.model)), spec, [t.build() for t in spec.tasks], progress=False,
                           log_every=steps)
            hf_seconds += tokens / result.history[-1]["train/tokens_per_s"]
    finally:
        torch.set_num_threads(before)
    total = sum(per_task.values())
    return [{"kind": "sweep_level", "sweep": sweep, "runs": len(runs), "tokens": total, "parallel": record["parallel"],
             "posbench_wall_s": record["wall_s"], "hf_llama_s": hf_seconds, "hf_threads": threads,
             "posbench_tokens_per_s": total / record["wall_s"], "hf_llama_tokens_per_s": total / hf_seconds}]
