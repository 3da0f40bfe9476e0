"""Copy: reproduce a random word sequence after a separator.

The classic length-generalization probe (Kazemnejad et al. 2023, "The Impact of Positional
Encoding on Length Generalization in Transformers"): ``<s> w1 .. wn | w1 .. wn``. Only the
copy is scored. With ``eos`` the answer ends with ``</s>``, so the model must also say where the
copy stops, as a generating model must in that study. A trailing ``</s>`` (not scored) makes up
the count when the length leaves one token over.

With ``distinct`` (the default) words are drawn without replacement, so each word's successor
is unambiguous and a one-token lookup (an induction head) suffices; past ``alphabet`` words the
sequence continues with a fresh permutation of the alphabet.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from tasks.base import BOS_ID, CONTENT_IDS, EOS_ID, SEP_ID, Example, Task, too_short


@dataclass(frozen=True)
class Copy(Task):
    name = "copy"
    primary_metric = "token_accuracy"  # the headline metric: share of answer tokens right (exact match is 0 for every scheme soon past the training length)
    alphabet: Optional[int] = None  # distinct words to draw from; None: all content words and numbers
    distinct: bool = True
    eos: bool = False  # the answer ends with </s> (scored): the model must say where the copy stops

    def __post_init__(self):
        if self.alphabet is not None and not 2 <= self.alphabet <= len(CONTENT_IDS):
            raise ValueError(f"{self.name}.alphabet={self.alphabet}: must be in [2, {len(CONTENT_IDS)}] (or null for all)")

    @property
    def pool(self) -> np.ndarray:
        return CONTENT_IDS[: self.alphabet] if self.alphabet else CONTENT_IDS

    def sequence(self, rng: np.random.Generator, n: int) -> list[int]:
        pool = self.pool
        if not self.distinct:
            return rng.choice(pool, size=n).tolist()
        reps = -(-n // len(pool))
        return np.concatenate([rng.permutation(pool) for _ in range(reps)])[:n].tolist()

    def target(self, seq: list[int]) -> list[int]:
        """The answer for the sequence ``seq``: the copy itself."""
        return seq

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        fixed = 3 if self.eos else 2  # <s>, |, and the closing </s>
        if length < fixed + 2:
            raise too_short(self.name, length, fixed + 2)
        n = (length - fixed) // 2
        seq = self.sequence(rng, n)
        answer = self.target(seq) + ([EOS_ID] if self.eos else [])
        tokens = [BOS_ID, *seq, SEP_ID, *answer]
        tokens += [EOS_ID] * (length - len(tokens))
        return Example(tokens=tokens, answer_spans=[(n + 2, n + 2 + len(answer))], meta={"n_items": n, "slices": {}})
