"""Evaluation at the training length and beyond it; returns records, never writes results.

For each task and each multiple m of the training length, every scheme is scored on the same
cached examples (``suite.evaluation.evalsets``). Predictions are teacher-forced argmax tokens, which for
exact match equals greedy decoding: a greedy decoder produces the gold span exactly when every
teacher-forced argmax in it is right. Each example's ``Evidence`` (its predictions, every
position's next-token loss, a ranking task's candidate log-likelihoods, the training length) goes
to each metric the task names (``Task.metrics``); the metric object computes its value and
combines the examples (``suite.data.metrics``: exact match, RULER's string_match_all/part,
token accuracy, answer loss, reciprocal rank, bits per byte). Per-example slices (needle depth,
number of keys, distance) of the metrics averaged over examples become extra rows. A length a
scheme cannot represent yields ``unsupported`` rows instead of a crash.

For a model whose schemes have learned position-indexed parameters (T5's buckets, a learned
table's rows, CoPE's columns), each scored (task, length) also gets an ``untrained_positions`` row:
the share of the entries read at that length that training never read
(``suite.model.position.base.untrained_share``), computed from the schemes and the training
length, with no forward pass.
"""
from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from suite.evaluation.evalcache import eval_set
from suite.model.position import LengthUnsupported
from suite.model.position.base import untrained_share
from suite.config.run_spec import RunSpec
from suite.data.batch import collate, next_token_loss
from suite.evaluation.slices import ALL, format_slice
from suite.data.metrics import CANDIDATES, MEAN, PREDICTIONS, PROFILE, Evidence, Metric, metric


def candidate_logliks(logprobs: torch.Tensor, ex) -> list[float]:
    """Log-likelihood of each single-token candidate at the example's (only) answer position.

    ``logprobs`` (T-1, V) are next-token log-probabilities for the example with its gold answer;
    with one-token candidates the prefix is identical for all of them, so one pass scores all.
    """
    (start, end), = ex.answer_spans
    if end - start != 1 or any(len(c) != 1 for c in ex.meta["candidates"]):
        raise ValueError("candidate ranking supports single-token answers and candidates")
    return [logprobs[start - 1, c[0]].item() for c in ex.meta["candidates"]]


class _Tally:
    """The values of one (task, length) cell's examples, per metric and per slice."""

    def __init__(self, metrics: list[Metric]):
        self.metrics, self.n = metrics, 0
        self.values: dict[str, list] = defaultdict(list)
        self.slices: dict[tuple[str, str], list[float]] = defaultdict(list)

    def add(self, ex, evidence: Evidence):
        self.n += 1
        slices = [format_slice(**{key: bucket}) for key, bucket in ex.meta.get("slices", {}).items()]
        for m in self.metrics:
            value = m.compute(evidence)
            if value is None:
                continue
            if m.aggregate == PROFILE:  # one (total, count) per slice of its own: a position bin
                for s, part in value.items():
                    self.slices[(m.name, s)].append(part)
                continue
            self.values[m.name].append(value)
            if m.aggregate == MEAN:  # a pooled metric (token accuracy, loss) is one figure over the cell's tokens
                for s in slices:
                    self.slices[(m.name, s)].append(value)

    def value(self, name: str) -> float:
        """The cell's value of metric ``name`` over its examples (``Metric.combine``)."""
        return next(m for m in self.metrics if m.name == name).combine(self.values[name])

    def rows(self):
        """(metric, value, examples, slice) of every metric with a value: over all examples, then per slice."""
        out = [(m.name, self.value(m.name), self.n, ALL) for m in self.metrics if self.values[m.name]]
        out += [(m, metric(m).combine(v), len(v), s) for (m, s), v in sorted(self.slices.items())]
        return out


def scored(ex, predicted, nll, logprobs=None, train_len: int = 0) -> Evidence:
    """The ``Evidence`` of example ``ex``: ``predicted`` the teacher-forced argmax of every
    position, ``nll`` (T - 1,) each next token's loss, ``logprobs`` (T - 1, V) the next-token
    log-probabilities when a metric reads the candidates (a ranking task)."""
    logliks = None if logprobs is None else candidate_logliks(logprobs, ex)
    return Evidence(ex.tokens, ex.answer_spans, predicted[: len(ex.tokens)], nll[: len(ex.tokens) - 1],
                    logliks=logliks, gold=ex.meta.get("gold"), train_len=train_len)


def metrics_of(task) -> list[Metric]:
    """The metric objects of the task's ``metrics``."""
    return [metric(name) for name in task.metrics]


def score_prediction(task, ex, predicted: list[int]) -> dict[str, float]:
    """The values for example ``ex`` of the task's per-example metrics that read only its
    predicted tokens (exact match, RULER's string matches): what a greedy decoder's output
    ``predicted`` (a token for every position) scores."""
    evidence = Evidence(ex.tokens, ex.answer_spans, list(predicted)[: len(ex.tokens)])
    return {m.name: m.compute(evidence) for m in metrics_of(task) if m.reads == PREDICTIONS and m.aggregate == MEAN}


@torch.no_grad()
def score_examples(model, task, examples, batch_size: int, device, autocast, train_len: int = 0) -> _Tally:
    tally = _Tally(metrics_of(task))
    ranks = any(m.reads == CANDIDATES for m in tally.metrics)
    for i in range(0, len(examples), batch_size):
        batch = examples[i : i + batch_size]
        tokens, mask = collate(batch)
        tokens, mask = tokens.to(device), mask.to(device)
        with autocast:
            logits = model(tokens)
        nll, _ = next_token_loss(logits, tokens, mask, reduction="none")  # (B, T-1)
        pred = torch.cat([tokens[:, :1], logits[:, :-1].argmax(-1)], dim=1).cpu().tolist()  # (B, T)
        nll = nll.double().cpu().numpy()
        logprobs = torch.log_softmax(logits[:, :-1].float(), dim=-1) if ranks else None  # (B, T-1, V)
        for j, ex in enumerate(batch):
            tally.add(ex, scored(ex, pred[j], nll[j], None if logprobs is None else logprobs[j], train_len))
    return tally


def evaluate(model, spec: RunSpec, tasks, device: Optional[torch.device] = None,
             cache_dir: Optional[Path] = None, timing: Optional[dict] = None) -> list[dict]:
    """Rows for every (task, eval length): ``tasks`` is a list of (TaskSpec, task) pairs.
    ``timing`` (a dict) receives ``eval_sets_s``: the time spent generating or loading eval sets."""
    device = device or next(model.parameters()).device
    model.eval()
    limit = model.max_length()
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=spec.train.precision == "bf16")
    rows: list[dict] = []
    for task_spec, task in tasks:
        for length in spec.eval_lengths:
            t0 = time.perf_counter()
            examples, digest = eval_set(task_spec.name, dict(task_spec.params), task, length, spec.eval.seed,
                                        spec.eval.n_examples, cache_dir)
            if timing is not None:
                timing["eval_sets_s"] = timing.get("eval_sets_s", 0.0) + time.perf_counter() - t0
            base = {"task": task_spec.name, "eval_len": length, "len_ratio": length / spec.train.seq_len,
                    "eval_set": digest}
            # every metric the task is scored by, so every board marks the length '-'
            unsupported = [{**base, "slice": ALL, "metric": m, "value": float("nan"), "n": 0, "status": "unsupported"}
                           for m in task.metrics]
            if limit is not None and max(len(ex.tokens) for ex in examples) - 1 > limit:
                rows += unsupported
                continue
            try:
                tally = score_examples(model, task, examples, spec.eval.batch_size, device, autocast, spec.train.seq_len)
            except LengthUnsupported:
                rows += unsupported
                continue
            rows += [{**base, "slice": s, "metric": m, "value": v, "n": n, "status": "ok"} for m, v, n, s in tally.rows()]
            rows += untrained_rows(model, spec, base)
    return rows


def untrained_rows(model, spec: RunSpec, base: dict) -> list[dict]:
    """The ``untrained_positions`` row of one scored (task, length) cell ``base``: the share of the
    position-indexed entries the model's schemes read at its length that training at
    ``train.seq_len`` never read (``n``: the entries read); none for schemes without such entries."""
    found = untrained_share(model.active_schemes(), base["eval_len"], spec.train.seq_len)
    if found is None:
        return []
    share, read = found
    return [{**base, "slice": ALL, "metric": "untrained_positions", "value": share, "n": read, "status": "ok"}]
