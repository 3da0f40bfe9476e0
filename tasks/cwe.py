"""Common words extraction: name the few words that recur most in a list.

RULER's aggregation task (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your
Long-Context Language Models?")::

    <s> w1 w2 .. wn ? common : c1 .. ck

The ``k`` common words each occur ``c`` times, together about ``common_share`` of the list
(``c = round(common_share * n / k)``); the other positions hold words drawn at random from the
remaining words, each at most ``c - 1`` times (drawn without replacement from ``c - 1`` copies
of every remaining word), so every common word is strictly more frequent than every other word.
Where that cannot hold (a small share at a great length) ``c`` is raised to the least count that
can; ``c`` is always at least 2. The answers are the common words in order of first appearance,
each its own span. Slice: ``n_keys`` = k.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.base import (
    ANSWER_ID, BOS_ID, MULTI_ANSWER, QUERY_ID, TOKEN_ID, WORD_IDS, Builder, Example, Task, too_short,
)

COMMON = TOKEN_ID["common"]


@dataclass(frozen=True)
class CommonWords(Task):
    name = "cwe"
    primary_metric = "string_match_all"  # the headline metric: RULER's string_match_all
    metrics = MULTI_ANSWER  # exact match and RULER's string_match_all / _part of its several answers
    k: int = 2  # common words to name
    common_share: float = 0.5  # fraction of the list taken by the common words together

    def __post_init__(self):
        if not isinstance(self.k, int) or not 1 <= self.k <= len(WORD_IDS) - 1:
            raise ValueError(f"cwe.k={self.k}: must be an integer in [1, {len(WORD_IDS) - 1}]")
        if not 0 < self.common_share < 1:
            raise ValueError(f"cwe.common_share={self.common_share}: must be in (0, 1)")

    def count(self, n: int) -> int:
        """Occurrences of each common word in a list of ``n`` words."""
        n_rest = len(WORD_IDS) - self.k
        feasible = -(-(n + n_rest) // (n_rest + self.k))  # least c with n_rest * (c - 1) >= n - k * c
        return max(2, round(self.common_share * n / self.k), feasible)

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        minimum = 1 + 2 * self.k + 3 + self.k  # <s>, each common word twice, "? common :", answers
        n = length - 4 - self.k  # list words
        c = min(self.count(n), n // self.k) if n > 0 else 0
        if length < minimum or c < 2:
            raise too_short(self.name, length, minimum)
        words = rng.permutation(WORD_IDS)
        common, rest = words[: self.k], words[self.k :]
        n_other = n - self.k * c
        others = rng.choice(np.repeat(rest, min(c - 1, max(n_other, 1))), size=n_other, replace=False)
        items = rng.permutation(np.concatenate([np.repeat(common, c), others])).tolist()
        first = sorted(common.tolist(), key=items.index)

        b = Builder([BOS_ID])
        b.add(items)
        b.add([QUERY_ID, COMMON, ANSWER_ID])
        for word in first:
            b.answer([word])
        return b.example(slices={"n_keys": str(self.k)}, k=self.k, count=int(c), n_items=n)
