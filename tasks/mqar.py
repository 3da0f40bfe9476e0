"""MQAR: multi-query associative recall.

Following Arora et al. 2023, "Zoology: Measuring and Improving Recall in Efficient Language
Models", in its own layout: the pairs, a separator, then the queried keys, each followed by
its value::

    <s> k1 v1 k2 v2 .. kP vP | ka va kb vb ..

Keys are distinct content words, values random numbers (repeats allowed). The ``n_queries``
queried keys are distinct, drawn from the P pairs in random order, and each value after a
queried key is its own one-token answer span. Recalling a value is "find the earlier occurrence
of this key, read the token after it", the operation induction heads perform.

P is as many pairs as fit (``(length - 2 - 2 * n_queries) // 2``), capped at ``max_pairs`` and at
the number of words. Tokens left over (one when the parity is odd; many at long lengths once the
cap binds) are single ``.`` tokens spread uniformly at random over the gaps around the pairs
(after ``<s>``, between pairs, before the ``|``), never inside a pair.

Slices: ``n_keys`` (P, bucketed by powers of two: '<=8', '<=16', ...) and ``distance`` (from the
first query's key back to its pair's key, ``distance_bucket``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from tasks.base import (
    BOS_ID, DOT_ID, MULTI_ANSWER, NUMBER_IDS, SEP_ID, WORD_IDS, Builder, Example, Task, distance_bucket, too_short,
)


def count_bucket(n: int) -> str:
    """A count bucketed by powers of two: '<=8', '<=16', '<=32', ..."""
    bound = 8
    while n > bound:
        bound *= 2
    return f"<={bound}"


@dataclass(frozen=True)
class Mqar(Task):
    name = "mqar"
    primary_metric = "string_match_all"  # the headline metric: share of queried values recalled (RULER's string_match_all)
    metrics = MULTI_ANSWER  # exact match and RULER's string_match_all / _part of its several answers
    n_queries: int = 6  # queries after the pairs, each about a different key
    max_pairs: int = len(WORD_IDS)  # cap on the number of key-value pairs (178: every word)
    key_alphabet: Optional[int] = None  # keys are drawn from the first N words (None: all)

    def __post_init__(self):
        if not 1 <= self.n_queries <= len(WORD_IDS):
            raise ValueError(f"mqar.n_queries={self.n_queries}: must be in [1, {len(WORD_IDS)}]")
        if self.key_alphabet is not None and not self.n_queries <= self.key_alphabet <= len(WORD_IDS):
            raise ValueError(f"mqar.key_alphabet={self.key_alphabet}: must be in [n_queries={self.n_queries}, {len(WORD_IDS)}]")
        if not self.n_queries <= self.max_pairs <= len(WORD_IDS):
            raise ValueError(f"mqar.max_pairs={self.max_pairs}: must be in [n_queries={self.n_queries}, {len(WORD_IDS)}]")

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        q = self.n_queries
        minimum = 2 + 2 * q + 2 * q
        if length < minimum:
            raise too_short(self.name, length, minimum)
        pool = WORD_IDS[: self.key_alphabet] if self.key_alphabet else WORD_IDS
        n_pairs = min((length - 2 - 2 * q) // 2, self.max_pairs, len(pool))
        n_dots = length - 2 - 2 * q - 2 * n_pairs
        keys = rng.choice(pool, size=n_pairs, replace=False)
        values = rng.choice(NUMBER_IDS, size=n_pairs)
        is_pair = np.zeros(n_pairs + n_dots, dtype=bool)
        is_pair[rng.choice(n_pairs + n_dots, size=n_pairs, replace=False)] = True

        b = Builder([BOS_ID])
        key_pos, i = [], 0
        for unit_is_pair in is_pair:
            if unit_is_pair:
                key_pos.append(b.add([keys[i], values[i]]))
                i += 1
            else:
                b.add([DOT_ID])
        queried = rng.choice(n_pairs, size=q, replace=False)
        b.add([SEP_ID])
        query_pos = []
        for j in queried:
            query_pos.append(b.add([keys[j]]))
            b.answer([values[j]])
        distance = query_pos[0] - key_pos[queried[0]]
        return b.example(
            n_pairs=n_pairs, n_dots=n_dots, queried=[int(j) for j in queried], distance=distance,
            slices={"n_keys": count_bucket(n_pairs), "distance": distance_bucket(distance)},
        )
