"""Copy of one repeated token: ``<s> w w .. w | w w .. w </s>``.

The "copy, repeated single token" task of Kazemnejad et al. 2023 ("The Impact of Positional
Encoding on Length Generalization in Transformers"). Every item is one word drawn at random, so
what is hard is the count: the answer ends with ``</s>`` (``eos``, on by default), and the model
must close the copy after exactly as many items as the input had.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.copy import Copy


@dataclass(frozen=True)
class CopyRepeat(Copy):
    name = "copy_repeat"
    primary_metric = "exact_match"  # the headline metric: the items are trivial, the stop is the task
    eos: bool = True

    def sequence(self, rng: np.random.Generator, n: int) -> list[int]:
        return [int(rng.choice(self.pool))] * n
