"""Evaluation at the training length and beyond it; returns records, never writes results.

For each task and each multiple m of the training length, every scheme is scored on the same
cached examples (``suite.evaluation.evalsets``). Predictions are teacher-forced argmax tokens, which for
exact match equals greedy decoding: a greedy decoder produces the gold span exactly when every
teacher-forced argmax in it is right. Metrics: the task's own (exact match, RULER's
string_match_all/part), token accuracy and answer loss; ranking tasks add reciprocal rank from
candidate log-likelihoods; natural-text tasks add bits per byte from every position's loss
(``score_nll``, told the training length). Per-example slices (needle depth, number of keys, distance) become
extra rows. A length a scheme cannot represent yields ``unsupported`` rows instead of a crash.
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
from suite.config.spec import RunSpec
from suite.data.batch import collate, next_token_loss
from suite.evaluation.slices import ALL, format_slice


def marked_metrics(task) -> tuple[str, ...]:
    """The metrics a board marks '-' where a run has no score (a length the scheme cannot represent,
    a diverged run): the task's ``metrics`` when it declares them, else its headline and exact match."""
    return tuple(dict.fromkeys(getattr(task, "metrics", None) or (task.primary_metric, "exact_match")))


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
    """Running sums for one (task, length) cell."""

    def __init__(self):
        self.sums, self.n = defaultdict(float), 0
        self.slices: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.tok_hits = self.tok_total = self.nll = 0.0

    def add(self, ex, scores: dict):
        self.n += 1
        slices = [format_slice(**{key: bucket}) for key, bucket in ex.meta.get("slices", {}).items()]
        for metric, value in scores.items():
            self.sums[metric] += value
            for s in slices:
                self.slices[(metric, s)].append(value)

    def rows(self):
        out = [(metric, total / self.n, self.n, ALL) for metric, total in self.sums.items()]
        out.append(("token_accuracy", self.tok_hits / max(self.tok_total, 1), self.n, ALL))
        out.append(("loss", self.nll / max(self.tok_total, 1), self.n, ALL))
        out += [(m, float(np.mean(v)), len(v), s) for (m, s), v in sorted(self.slices.items())]
        return out


@torch.no_grad()
def score_examples(model, task, examples, batch_size: int, device, autocast, train_len: int = 0) -> _Tally:
    tally = _Tally()
    ranks = hasattr(task, "score_candidates")
    per_position = hasattr(task, "score_nll")
    for i in range(0, len(examples), batch_size):
        batch = examples[i : i + batch_size]
        tokens, mask = collate(batch)
        tokens, mask = tokens.to(device), mask.to(device)
        with autocast:
            logits = model(tokens)
        nll, weight = next_token_loss(logits, tokens, mask, reduction="none")
        pred = logits[:, :-1].argmax(-1)
        tally.tok_hits += ((pred == tokens[:, 1:]).float() * weight).sum().item()
        tally.tok_total += weight.sum().item()
        tally.nll += (nll * weight).sum().item()
        pred_full = torch.cat([tokens[:, :1], pred], dim=1).cpu().tolist()
        logprobs = torch.log_softmax(logits[:, :-1].float(), dim=-1) if ranks else None
        for j, (ex, predicted) in enumerate(zip(batch, pred_full)):
            scores = dict(task.score(ex, predicted[: len(ex.tokens)]))
            if ranks:
                scores.update(task.score_candidates(ex, candidate_logliks(logprobs[j], ex)))
            if per_position:
                scores.update(task.score_nll(ex, nll[j, : len(ex.tokens) - 1].double().cpu().numpy(), train_len))
            tally.add(ex, scores)
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
            # the task's headline metric and exact match (or its own list), so every board marks the length '-'
            unsupported = [{**base, "slice": ALL, "metric": m, "value": float("nan"), "n": 0, "status": "unsupported"}
                           for m in marked_metrics(task)]
            if limit is not None and max(len(ex.tokens) for ex in examples) - 1 > limit:
                rows += unsupported
                continue
            try:
                tally = score_examples(model, task, examples, spec.eval.batch_size, device, autocast, spec.train.seq_len)
            except LengthUnsupported:
                rows += unsupported
                continue
            rows += [{**base, "slice": s, "metric": m, "value": v, "n": n, "status": "ok"} for m, v, n, s in tally.rows()]
    return rows
