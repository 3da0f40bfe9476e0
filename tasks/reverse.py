"""Reverse: reproduce a random word sequence backwards after a separator.

A standard length-generalization probe (Zhou et al. 2024, "What Algorithms Can Transformers
Learn? A Study in Length Generalization"): ``<s> w1 .. wn | wn .. w1``. Only the reversed
sequence is scored (one answer span). For an odd length a trailing ``</s>`` (not scored) makes
up the count. The words are drawn exactly as in ``copy`` (``Copy.sequence``), so with
``distinct`` each word occurs once per ``alphabet`` words and its predecessor is unambiguous.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.base import BOS_ID, CONTENT_IDS, EOS_ID, SEP_ID, Example, exact_match, too_short
from tasks.copy import Copy


@dataclass(frozen=True)
class Reverse(Copy):
    name = "reverse"

    def __post_init__(self):
        if self.alphabet is not None and not 2 <= self.alphabet <= len(CONTENT_IDS):
            raise ValueError(f"reverse.alphabet={self.alphabet}: must be in [2, {len(CONTENT_IDS)}] (or null for all)")

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        if length < 4:
            raise too_short(self.name, length, 4)
        n = (length - 2) // 2
        seq = self.sequence(rng, n)
        tokens = [BOS_ID, *seq, SEP_ID, *seq[::-1]]
        if len(tokens) < length:
            tokens.append(EOS_ID)
        return Example(tokens=tokens, answer_spans=[(n + 2, 2 * n + 2)], meta={"n_items": n, "slices": {}})

    def score(self, example: Example, predicted: list[int]) -> dict[str, float]:
        return exact_match(example, predicted)
