"""Frequent words extraction: name the most frequent words of a Zipf-distributed stream.

RULER's second aggregation task (Hsieh et al. 2024, "RULER: What's the Real Context Size of
Your Long-Context Language Models?")::

    <s> w1 w2 .. wn ? frequent : f1 .. fk

Counts rule: the words are put in a random order (rank 1, 2, ..); rank r gets the share
``r ** -alpha / sum_s s ** -alpha`` of the ``n`` list positions, rounded down, and the positions
left over go one each to the ranks with the largest remainders (ties to the earlier rank). Then,
for i = k, k-1, .., 1, rank i is raised until it is strictly above rank i + 1, taking one count
at a time from the least frequent word ranked below k (should none be left, in a very short
list, the counts are k + the rest, k - 1, .., 1). So the top ``k`` counts are strictly
decreasing and strictly above every other word's count. The list is the counted words in a
random order. The answers are the top ``k`` words, most frequent first, each its own span.
Slice: ``n_keys`` = k.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.base import (
    ANSWER_ID, BOS_ID, MULTI_ANSWER, QUERY_ID, TOKEN_ID, WORD_IDS, Builder, Example, Task, too_short,
)

FREQUENT = TOKEN_ID["frequent"]


def zipf_counts(n: int, n_words: int, alpha: float, k: int) -> np.ndarray:
    """Counts for ranks 1..n_words summing to ``n >= k (k + 1) / 2``, by the rule in the module
    docstring."""
    weights = np.arange(1, n_words + 1, dtype=float) ** -alpha
    raw = n * weights / weights.sum()
    counts = np.floor(raw).astype(int)
    leftover = n - int(counts.sum())
    counts[np.argsort(-(raw - counts), kind="stable")[:leftover]] += 1
    for i in range(k - 1, -1, -1):
        while counts[i] <= counts[i + 1]:
            donors = np.nonzero(counts[k:])[0]
            if len(donors) == 0:  # a very short list: k + extra, k - 1, .., 1
                counts = np.zeros(n_words, dtype=int)
                counts[:k] = np.arange(k, 0, -1)
                counts[0] += n - k * (k + 1) // 2
                return counts
            counts[k + donors[-1]] -= 1
            counts[i] += 1
    return counts


@dataclass(frozen=True)
class FrequentWords(Task):
    name = "fwe"
    primary_metric = "string_match_all"  # the headline metric: RULER's string_match_all
    metrics = MULTI_ANSWER  # exact match and RULER's string_match_all / _part of its several answers
    k: int = 2  # most frequent words to name
    alpha: float = 2.0  # Zipf exponent: rank r occurs in proportion to r ** -alpha

    def __post_init__(self):
        if not isinstance(self.k, int) or not 1 <= self.k <= len(WORD_IDS) - 1:
            raise ValueError(f"fwe.k={self.k}: must be an integer in [1, {len(WORD_IDS) - 1}]")
        if not isinstance(self.alpha, (int, float)) or not self.alpha > 0:
            raise ValueError(f"fwe.alpha={self.alpha}: must be > 0")

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        minimum = 1 + self.k * (self.k + 1) // 2 + 3 + self.k  # <s>, counts k..1, "? frequent :", answers
        n = length - 4 - self.k  # list words
        if length < minimum:
            raise too_short(self.name, length, minimum)
        counts = zipf_counts(n, len(WORD_IDS), float(self.alpha), self.k)
        words = rng.permutation(WORD_IDS)
        items = rng.permutation(np.repeat(words, counts)).tolist()

        b = Builder([BOS_ID])
        b.add(items)
        b.add([QUERY_ID, FREQUENT, ANSWER_ID])
        for word in words[: self.k]:
            b.answer([word])
        return b.example(slices={"n_keys": str(self.k)}, k=self.k,
                         top_counts=counts[: self.k + 1].tolist(), n_items=n)
