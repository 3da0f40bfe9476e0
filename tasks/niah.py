"""Needle in a haystack: single, multi-key, multi-value and multi-query retrieval.

The four synthetic NIAH variants of Hsieh et al. 2024, "RULER: What's the Real Context Size of
Your Long-Context Language Models?", over the PosBench vocabulary. The haystack is random noise
words; a needle is the three tokens ``key = value`` (key a word, value a number); the query part
at the end is ``? key : value``::

    <s> noise .. key = value .. noise ? key : value

Key words of an example are distinct and never occur in its noise, so each queried key occurs
exactly once before the query part. Needles go into the noise at sorted, uniformly random gaps
(two needles may be adjacent). Every answer is one value token and its own answer span.

Slices: ``depth`` (needle key position over the context before the first ``?``,
``depth_bucket``), ``distance`` (from the first query's key back to its needle's key,
``distance_bucket``) and, for several keys, ``n_keys``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from tasks.base import (
    ANSWER_ID, ASSIGN_ID, BOS_ID, MULTI_ANSWER, NUMBER_IDS, QUERY_ID, WORD_IDS, Builder, Example, Task,
    depth_bucket, distance_bucket, scatter, too_short,
)

N_WORDS = len(WORD_IDS)


def _check(task: str, param: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{task}.{param}={value}: must be in [{low}, {high}]")


class _Niah(Task):
    """Shared construction: context with needles, query part, slices."""

    name: str

    def context(self, rng, length, needles, keys, query_len, slots=None):
        """``<s>`` + noise (no word of ``keys``) with ``needles`` inserted in order, sized so the
        whole example is ``length`` once ``query_len`` query tokens follow. ``slots`` pins the
        noise index before which each needle goes (default: sorted random). Returns the builder
        and each needle's start position."""
        n_noise = length - 1 - sum(len(n) for n in needles) - query_len
        if n_noise < 0:
            raise too_short(self.name, length, length - n_noise)
        tokens, starts = scatter(rng, needles, n_noise, np.setdiff1d(WORD_IDS, keys), cuts=slots)
        b = Builder([BOS_ID])
        b.add(tokens)
        return b, [start + 1 for start in starts]

    @staticmethod
    def query(b: Builder, key, values) -> int:
        """Append ``? key : v1 .. vn`` (each value an answer span); returns the key's position."""
        pos = b.add([QUERY_ID, key]) + 1
        b.add([ANSWER_ID])
        for v in values:
            b.answer([v])
        return pos

    @staticmethod
    def slices(needle_pos: int, query_key_pos: int, context_len: int, **extra) -> dict:
        return {"depth": depth_bucket(needle_pos, context_len),
                "distance": distance_bucket(query_key_pos - needle_pos), **extra}


@dataclass(frozen=True)
class NiahSingle(_Niah):
    """One needle ``key = value`` at a random (or pinned) depth; ``<s> .. key = value .. ? key : value``."""

    name = "niah_single"
    primary_metric = "exact_match"  # the headline metric: the one answer right
    depth: Optional[float] = None  # None: uniform random depth; a float in [0, 1] pins it

    def __post_init__(self):
        if self.depth is not None and not 0.0 <= self.depth <= 1.0:
            raise ValueError(f"niah_single.depth={self.depth}: must be in [0, 1] (or null for random)")

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        key = int(rng.choice(WORD_IDS))
        value = int(rng.choice(NUMBER_IDS))
        slots = None
        if self.depth is not None:
            n_noise = max(length - 1 - 3 - 4, 0)
            slots = [int(round(self.depth * n_noise))]
        b, (pos,) = self.context(rng, length, [[key, ASSIGN_ID, value]], [key], 4, slots)
        ctx = len(b)
        qpos = self.query(b, key, [value])
        return b.example(needle_pos=pos, context_len=ctx, slices=self.slices(pos, qpos, ctx))


@dataclass(frozen=True)
class NiahMultikey(_Niah):
    """The real needle plus ``n_distractors`` needles with other keys (random values), all in
    random order; the query asks the real key: ``.. k1 = v1 .. k2 = v2 .. ? k : v``."""

    name = "niah_multikey"
    primary_metric = "exact_match"  # the headline metric: the one answer right
    n_distractors: int = 2  # needles with other keys besides the queried one

    def __post_init__(self):
        _check(self.name, "n_distractors", self.n_distractors, 1, N_WORDS - 1)

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        n = 1 + self.n_distractors
        keys = rng.choice(WORD_IDS, size=n, replace=False)
        values = rng.choice(NUMBER_IDS, size=n)
        order = rng.permutation(n)  # order[i]: which needle comes i-th; needle 0 is the real one
        needles = [[keys[j], ASSIGN_ID, values[j]] for j in order]
        b, starts = self.context(rng, length, needles, keys, 4)
        pos = starts[int(np.flatnonzero(order == 0)[0])]
        ctx = len(b)
        qpos = self.query(b, keys[0], [values[0]])
        return b.example(needle_pos=pos, context_len=ctx,
                         slices=self.slices(pos, qpos, ctx, n_keys=str(n)))


@dataclass(frozen=True)
class NiahMultivalue(_Niah):
    """One key with ``n_values`` needles ``key = v_i`` (distinct values); the query wants every
    value in order of appearance: ``.. k = v1 .. k = v2 .. ? k : v1 v2``. Depth is the first
    needle's."""

    name = "niah_multivalue"
    primary_metric = "string_match_all"  # the headline metric: RULER's string_match_all
    metrics = MULTI_ANSWER  # exact match and RULER's string_match_all / _part of its several answers
    n_values: int = 2  # needles (distinct values) for the one key

    def __post_init__(self):
        _check(self.name, "n_values", self.n_values, 1, len(NUMBER_IDS))

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        key = int(rng.choice(WORD_IDS))
        values = rng.choice(NUMBER_IDS, size=self.n_values, replace=False)
        needles = [[key, ASSIGN_ID, v] for v in values]
        b, starts = self.context(rng, length, needles, [key], 3 + self.n_values)
        ctx = len(b)
        qpos = self.query(b, key, values)
        return b.example(needle_starts=starts, context_len=ctx,  # several needles: no single needle_pos
                         slices=self.slices(starts[0], qpos, ctx))


@dataclass(frozen=True)
class NiahMultiquery(_Niah):
    """``n_queries`` needles with distinct keys; then one ``? k : v`` per needle, in a random
    order (not needle order): ``.. k1 = v1 .. k2 = v2 .. ? k2 : v2 ? k1 : v1``. Depth and distance
    are the first queried needle's."""

    name = "niah_multiquery"
    primary_metric = "string_match_all"  # the headline metric: RULER's string_match_all
    metrics = MULTI_ANSWER  # exact match and RULER's string_match_all / _part of its several answers
    n_queries: int = 2  # needles, each queried once

    def __post_init__(self):
        _check(self.name, "n_queries", self.n_queries, 1, N_WORDS)

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        n = self.n_queries
        keys = rng.choice(WORD_IDS, size=n, replace=False)
        values = rng.choice(NUMBER_IDS, size=n)
        needles = [[k, ASSIGN_ID, v] for k, v in zip(keys, values)]
        b, starts = self.context(rng, length, needles, keys, 4 * n)
        ctx = len(b)
        order = rng.permutation(n)
        qpos = [self.query(b, keys[j], [values[j]]) for j in order]
        first = starts[order[0]]
        return b.example(needle_starts=starts, query_order=order.tolist(), context_len=ctx,  # several needles
                         slices=self.slices(first, qpos[0], ctx, n_keys=str(n)))
