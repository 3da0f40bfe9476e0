"""Batches, padding and the answer-span loss, shared by training and evaluation.

Training lengths follow Kazemnejad et al. 2023 ("The Impact of Positional Encoding on Length
Generalization in Transformers"): every length from a minimum up to the training length L is
equally frequent. Each batch draws one length uniformly from [lo, L], where lo is the larger of
``train.min_len`` and the shortest length every task of the batch can generate, so the lengths
are exactly uniform over the range a task supports and no example is padded.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from tasks.base import PAD_ID


def collate(examples):
    """(tokens, answer_mask): tokens (B, L) long, padded with PAD; the mask marks answer tokens."""
    L = max(len(ex.tokens) for ex in examples)
    tokens = np.full((len(examples), L), PAD_ID, dtype=np.int64)
    mask = np.zeros((len(examples), L), dtype=bool)
    for i, ex in enumerate(examples):
        tokens[i, : len(ex.tokens)] = ex.tokens
        for s, e in ex.answer_spans:
            mask[i, s:e] = True
    return torch.from_numpy(tokens), torch.from_numpy(mask)


@lru_cache(maxsize=None)
def shortest_length(task, limit: int) -> int:
    """The shortest length in [1, limit] that ``task`` can generate (``limit`` if none shorter).

    A task raises ``ValueError`` for a length it cannot fill; its minimum does not depend on the
    random draw, so one probe per length with a fixed generator finds it.
    """
    for n in range(1, limit + 1):
        try:
            task.generate(np.random.default_rng(0), n)
            return n
        except ValueError:
            continue
    return limit


def length_range(tasks, length: int, min_length: Optional[int]) -> tuple[int, int]:
    """[lo, hi] of the training lengths: hi is ``length``; lo is ``min_length`` (None: ``length``)
    raised to the shortest length every task can generate."""
    if min_length is None:
        return length, length
    lo = max([min_length] + [shortest_length(task, length) for task in tasks])
    return min(lo, length), length


def sample_length(rng: np.random.Generator, lo: int, hi: int) -> int:
    """One length, uniform over the integers [lo, hi]."""
    return hi if lo >= hi else int(rng.integers(lo, hi + 1))


def make_batch(tasks, rng: np.random.Generator, length: int, batch_size: int, min_length: Optional[int] = None):
    """A fresh batch of one length drawn by ``sample_length`` (every example ``length`` tokens
    when ``min_length`` is None), an even mixture of ``tasks`` (a task or a list)."""
    tasks = tasks if isinstance(tasks, (list, tuple)) else [tasks]
    n = sample_length(rng, *length_range(tuple(tasks), length, min_length))
    return collate([tasks[i % len(tasks)].generate(rng, n) for i in range(batch_size)])


def next_token_loss(logits, tokens, mask, reduction="mean", denominator=None):
    """Cross-entropy of predicting tokens[:, 1:] from logits[:, :-1] where mask[:, 1:] is set.

    The mean divides by the number of scored tokens, or by ``denominator`` when given (a share
    of a global batch divides by the global count, so averaged gradients equal the global mean's).
    """
    target = tokens[:, 1:]
    weight = mask[:, 1:].float()
    nll = F.cross_entropy(logits[:, :-1].float().transpose(1, 2), target, reduction="none")  # (B, T-1)
    if reduction == "none":
        return nll, weight
    count = weight.sum() if denominator is None else torch.as_tensor(denominator, dtype=weight.dtype)
    return (nll * weight).sum() / count.clamp(min=1.0)
