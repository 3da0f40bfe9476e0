"""Copy: reproduce a random word sequence after a separator.

The classic length-generalization probe (Kazemnejad et al. 2023, "The Impact of Positional
Encoding on Length Generalization in Transformers"): ``<s> w1 .. wn | w1 .. wn``. Only the
copy is scored. For an odd length a trailing ``</s>`` (not scored) makes up the count.

With ``distinct`` (the default) words are drawn without replacement, so each word's successor
is unambiguous and a one-token lookup (an induction head) suffices; past ``alphabet`` words the
sequence continues with a fresh permutation of the alphabet.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from tasks.base import BOS_ID, CONTENT_IDS, EOS_ID, SEP_ID, Example, exact_match


@dataclass(frozen=True)
class Copy:
    name = "copy"
    alphabet: Optional[int] = None  # distinct words to draw from; None: all content words and numbers
    distinct: bool = True

    def __post_init__(self):
        if self.alphabet is not None and not 2 <= self.alphabet <= len(CONTENT_IDS):
            raise ValueError(f"copy.alphabet={self.alphabet}: must be in [2, {len(CONTENT_IDS)}] (or null for all)")

    @property
    def pool(self) -> np.ndarray:
        return CONTENT_IDS[: self.alphabet] if self.alphabet else CONTENT_IDS

    def sequence(self, rng: np.random.Generator, n: int) -> list[int]:
        pool = self.pool
        if not self.distinct:
            return rng.choice(pool, size=n).tolist()
        reps = -(-n // len(pool))
        return np.concatenate([rng.permutation(pool) for _ in range(reps)])[:n].tolist()

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        if length < 4:
            raise ValueError(f"copy needs length >= 4, got {length}")
        n = (length - 2) // 2
        seq = self.sequence(rng, n)
        tokens = [BOS_ID, *seq, SEP_ID, *seq]
        if len(tokens) < length:
            tokens.append(EOS_ID)
        return Example(tokens=tokens, answer_spans=[(n + 2, 2 * n + 2)], meta={"n_items": n})

    def score(self, example: Example, predicted: list[int]) -> dict[str, float]:
        return exact_match(example, predicted)
