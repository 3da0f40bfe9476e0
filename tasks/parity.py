"""Parity: the parity of a bit string, the simplest state that a fixed-depth reader must track.

Parity is the standard failure case of transformers on length generalization: Hahn 2020,
"Theoretical Limitations of Self-Attention in Neural Sequence Models" (TACL), shows that soft
attention's sensitivity to one bit fades with length; Anil et al. 2022, "Exploring Length
Generalization in Large Language Models" (NeurIPS), and Delétang et al. 2023, "Neural Networks
and the Chomsky Hierarchy" (ICLR, the "parity check" task), find that trained transformers fail it
beyond the training length. It is a two-element group word problem (Z2; see ``permutation``), and a
data-dependent position can solve it in one layer: a PaTH transform with beta = 2 is a reflection,
whose sign flips with every 1 it passes (Yang et al. 2025).

An example is ``<s>``, bits written as the numbers 0 and 1, and a read ``?`` followed by the parity
of every bit so far::

    <s> 1 0 1 1 ? 1                       every = 0: one read, after the last bit
    <s> 1 0 1 1 ? 1 0 0 1 ? 0 1 ? 1       every = 4: a read after every 4th bit and after the last

Each read's answer is one span. With ``every`` > 0 an answer stays in the context of later reads
(as flip-flop's do), so a reader can carry it forward and needs only the parity of the bits since
the last read; ``every`` = 0, the default, asks for the whole string's parity in one read and is
the state-tracking test proper. The bits fill the length; ``</s>`` pads what a last read leaves.
Headline: ``string_match_all``, the share of an example's reads right (with one read, exact match).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.base import BOS_ID, EOS_ID, MULTI_ANSWER, QUERY_ID, TOKEN_ID, Builder, Example, Task, too_short

BITS = (TOKEN_ID["0"], TOKEN_ID["1"])
MIN_LENGTH = 4  # <s> b ? p


def reads(n: int, every: int) -> list[int]:
    """The bit counts after which a read comes: every ``every``-th, and the last (``every`` = 0: the last)."""
    marks = list(range(every, n, every)) if every else []
    return marks + [n]


def n_items(length: int, every: int, answer_width: int = 1) -> int:
    """The most items (bits, group elements) whose example, ``<s>``, the items and a read of
    ``1 + answer_width`` tokens after each read point, fits in ``length`` tokens."""
    m = length - 2 - answer_width
    while m > 1 and 1 + m + len(reads(m, every)) * (1 + answer_width) > length:
        m -= 1
    return m


def check_every(task: str, every) -> None:
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise ValueError(f"{task}.every={every!r}: must be an integer >= 0 (0: one read, after the last item)")


@dataclass(frozen=True)
class Parity(Task):
    name = "parity"
    primary_metric = "string_match_all"  # share of reads right (one read: exact match)
    metrics = MULTI_ANSWER  # exact match and RULER's string_match_all / _part of its several answers
    every: int = 0  # a read after every this many bits and after the last; 0: after the last only

    def __post_init__(self):
        check_every(self.name, self.every)

    @property
    def answers_between_queries(self) -> bool:
        return self.every > 0

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        if length < MIN_LENGTH:
            raise too_short(self.name, length, MIN_LENGTH)
        m = n_items(length, self.every)
        bits = rng.integers(2, size=m).tolist()
        b = Builder([BOS_ID])
        done = 0
        for mark in reads(m, self.every):
            b.add([BITS[bit] for bit in bits[done:mark]])
            b.add([QUERY_ID])
            b.answer([BITS[sum(bits[:mark]) % 2]])
            done = mark
        b.add([EOS_ID] * (length - len(b)))
        return b.example(n_bits=m, n_ones=sum(bits), every=self.every, slices={})
