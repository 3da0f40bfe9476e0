"""Evaluation at the training length and beyond it; returns records, never writes files.

For each multiple m of the training length, the same seeded examples are scored for every
scheme. Predictions are teacher-forced argmax tokens, which for exact match equals greedy
decoding: a greedy decoder produces the gold span exactly when every teacher-forced argmax in
it is right. Metrics: exact match (and a task's own metrics), token accuracy, answer loss.
A length a scheme cannot represent yields ``unsupported`` rows instead of a crash.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch

from suite.position import LengthUnsupported
from suite.spec import RunSpec
from suite.train import collate, next_token_loss


def eval_lengths(spec: RunSpec) -> list[int]:
    return [int(round(m * spec.train.seq_len)) for m in spec.eval.multiples]


def eval_examples(task, spec: RunSpec, length: int):
    """The shared evaluation set for (task, length): seeded by the eval seed and the length only."""
    rng = np.random.default_rng([spec.eval.seed, length])
    return [task.generate(rng, length) for _ in range(spec.eval.n_examples)]


def _row(length, spec, metric, value, n, status="ok", slice_="all"):
    return {"eval_len": length, "len_ratio": length / spec.train.seq_len, "slice": slice_,
            "metric": metric, "value": value, "n": n, "status": status}


@torch.no_grad()
def evaluate(model, spec: RunSpec, task, device: torch.device | None = None) -> list[dict]:
    device = device or next(model.parameters()).device
    model.eval()
    rows: list[dict] = []
    limit = model.max_length()
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=spec.train.precision == "bf16")
    for length in eval_lengths(spec):
        examples = eval_examples(task, spec, length)
        if limit is not None and max(len(ex.tokens) for ex in examples) - 1 > limit:
            rows.append(_row(length, spec, "exact_match", float("nan"), 0, status="unsupported"))
            continue
        sums, n = defaultdict(float), 0
        slices: dict[tuple[str, str], list[float]] = defaultdict(list)
        tok_hits = tok_total = nll_sum = 0.0
        try:
            for i in range(0, len(examples), spec.eval.batch_size):
                batch = examples[i : i + spec.eval.batch_size]
                tokens, mask = collate(batch)
                tokens, mask = tokens.to(device), mask.to(device)
                with autocast:
                    logits = model(tokens)
                nll, weight = next_token_loss(logits, tokens, mask, reduction="none")
                pred = logits[:, :-1].argmax(-1)
                hit = (pred == tokens[:, 1:]).float() * weight
                tok_hits += hit.sum().item()
                tok_total += weight.sum().item()
                nll_sum += (nll * weight).sum().item()
                pred_full = torch.cat([tokens[:, :1], pred], dim=1).cpu().tolist()
                for ex, predicted in zip(batch, pred_full):
                    scores = task.score(ex, predicted)
                    for metric, value in scores.items():
                        sums[metric] += value
                        for key, bucket in ex.meta.get("slices", {}).items():
                            slices[(metric, f"{key}={bucket}")].append(value)
                    n += 1
        except LengthUnsupported:
            rows.append(_row(length, spec, "exact_match", float("nan"), 0, status="unsupported"))
            continue
        for metric, total in sums.items():
            rows.append(_row(length, spec, metric, total / n, n))
        rows.append(_row(length, spec, "token_accuracy", tok_hits / max(tok_total, 1), n))
        rows.append(_row(length, spec, "loss", nll_sum / max(tok_total, 1), n))
        for (metric, slice_), values in sorted(slices.items()):
            rows.append(_row(length, spec, metric, float(np.mean(values)), len(values), slice_=slice_))
    return rows

