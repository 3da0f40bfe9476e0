"""MQAR: multi-query associative recall.

Following Arora et al. 2023, "Zoology: Measuring and Improving Recall in Efficient Language
Models". Format::

    <s> k1 v1 k2 v2 .. kP vP ? ka : va ? kb : vb ..

Keys are distinct content words, values random numbers (repeats allowed). There are
``n_queries`` queries ``? k : v``; their keys are distinct, drawn from the P pairs in random
order, and each value ``v`` is its own one-token answer span.

P is as many pairs as fit (``(length - 1 - 4 * n_queries) // 2``), capped at ``max_pairs`` and at
the number of words. Tokens left over (one when the parity is odd; many at long lengths once the
cap binds) are single ``.`` tokens spread uniformly at random over the gaps around the pairs
(after ``<s>``, between pairs, before the first ``?``), never inside a pair.

Slices: ``n_keys`` (P, bucketed by powers of two: '<=8', '<=16', ...) and ``distance`` (from the
first query's key back to its pair's key, ``distance_bucket``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.base import (
    ANSWER_ID, BOS_ID, DOT_ID, NUMBER_IDS, QUERY_ID, WORD_IDS, Builder, Example,
    distance_bucket, multi_answer_scores, too_short,
)


def count_bucket(n: int) -> str:
    """A count bucketed by powers of two: '<=8', '<=16', '<=32', ..."""
    bound = 8
    while n > bound:
        bound *= 2
    return f"<={bound}"


@dataclass(frozen=True)
class Mqar:
    name = "mqar"
    n_queries: int = 2  # queries after the pairs, each about a different key
    max_pairs: int = len(WORD_IDS)  # cap on the number of key-value pairs (178: every word)

    def __post_init__(self):
        if not 1 <= self.n_queries <= len(WORD_IDS):
            raise ValueError(f"mqar.n_queries={self.n_queries}: must be in [1, {len(WORD_IDS)}]")
        if not self.n_queries <= self.max_pairs <= len(WORD_IDS):
            raise ValueError(f"mqar.max_pairs={self.max_pairs}: must be in [n_queries={self.n_queries}, {len(WORD_IDS)}]")

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        q = self.n_queries
        minimum = 1 + 2 * q + 4 * q
        if length < minimum:
            raise too_short(self.name, length, minimum)
        n_pairs = min((length - 1 - 4 * q) // 2, self.max_pairs)
        n_dots = length - 1 - 4 * q - 2 * n_pairs
        keys = rng.choice(WORD_IDS, size=n_pairs, replace=False)
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
        query_pos = []
        for j in queried:
            query_pos.append(b.add([QUERY_ID, keys[j]]) + 1)
            b.add([ANSWER_ID])
            b.answer([values[j]])
        distance = query_pos[0] - key_pos[queried[0]]
        return b.example(
            n_pairs=n_pairs, n_dots=n_dots, queried=[int(j) for j in queried], distance=distance,
            slices={"n_keys": count_bucket(n_pairs), "distance": distance_bucket(distance)},
        )

    def score(self, example: Example, predicted: list[int]) -> dict[str, float]:
        return multi_answer_scores(example, predicted)
