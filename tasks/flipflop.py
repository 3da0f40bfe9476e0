"""Flip-flop language modeling: keep one bit through a stream of instructions.

After Liu, Ash, Goel, Krishnamurthy and Zhang 2023, "Exposing Attention Glitches with Flip-Flop
Language Modeling" (NeurIPS 2023). A sequence drives a one-bit register: instructions alternate
with bits. A write stores its bit, an ignore carries a random bit that changes nothing, and a read
is followed by the stored bit, the one of the latest write. In the paper's FFL(p) the first
instruction is a write and the last a read, and every instruction between is drawn on its own:
ignore with probability p, write and read with (1 - p) / 2 each; bits after writes and ignores
are fair coin flips. Only the bits after reads are determined; each is its own answer span.

PosBench's vocabulary has no ``w``, ``r`` or ``i`` word, and a new word would change the
vocabulary size of every model and the shared file that every task's eval-set hash covers, so the
instructions are markers it has: ``=`` writes, ``.`` ignores, ``?`` reads::

    <s> = 1 . 0 . 1 ? 1 = 0 ? 0 . 1 ? 0

An example is ``<s>`` and (length - 1) // 2 instruction-bit pairs, with a closing ``</s>`` (not
scored) when the length leaves one token over; the shortest is ``<s> = b ? b`` (length 5). The
paper's sequences are 256 instructions (512 tokens); here the length is the run's, and as in every
PosBench task the loss covers the answers only (the paper's models also predict the random bits
and instructions, which no model can learn beyond their frequencies).

Training data is FFL(``p_ignore``), the paper's FFL(0.8) by default. Evaluation
(``eval_generate``) draws each example's split at random from the paper's three: ``in_dist``
(``p_ignore``), ``sparse`` (``p_sparse``, 0.98: long gaps from a write to its read) and ``dense``
(``p_dense``, 0.1).

Scores: the paper reports the error rate over reads, so the headline is the share of an
example's reads predicted right (``string_match_all``: one minus that rate, averaged over
examples, so each split weighs alike; the evaluation-wide ``token_accuracy`` pools the reads as
the paper does, and the dense split's many reads dominate it). Exact match (every read of the
example right) is reported too but not ranked by: a dense example holds dozens of reads and a
sparse one a few, so it would rank read counts as much as memory. Slices: ``split``, and ``distance``, the largest distance in tokens from a read back
to the write it reports (``distance_bucket``), the example's hardest dependency.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.base import (
    ASSIGN_ID, BOS_ID, DOT_ID, EOS_ID, MULTI_ANSWER, QUERY_ID, TOKEN_ID, Builder, Example, Task, distance_bucket, too_short,
)

WRITE, IGNORE, READ = ASSIGN_ID, DOT_ID, QUERY_ID
BITS = (TOKEN_ID["0"], TOKEN_ID["1"])
SPLITS = ("in_dist", "sparse", "dense")
MIN_LENGTH = 5  # <s> = b ? b


def instructions(rng: np.random.Generator, n: int, p_ignore: float) -> list[int]:
    """``n`` instructions of FFL(p_ignore): a write, n - 2 drawn independently, a read."""
    side = (1.0 - p_ignore) / 2
    middle = rng.choice([WRITE, READ, IGNORE], size=n - 2, p=[side, side, p_ignore])
    return [WRITE, *(int(op) for op in middle), READ]


def program(ops: list[int], bits: list[int], length: int, split: str, **meta) -> Example:
    """The example of instructions ``ops`` with ``bits`` (0 or 1) after writes and ignores (a
    read's entry is unused: it reports the latest write), padded with ``</s>`` to ``length``."""
    b = Builder([BOS_ID])
    stored = written = None
    distances = []
    for op, bit in zip(ops, bits):
        at = b.add([op])
        if op == READ:
            b.answer([BITS[stored]])
            distances.append(at - written)
            continue
        b.add([BITS[bit]])
        if op == WRITE:
            stored, written = bit, at
    b.add([EOS_ID] * (length - len(b)))
    return b.example(n_reads=len(distances), max_distance=max(distances), **meta,
                     slices={"split": split, "distance": distance_bucket(max(distances))})


@dataclass(frozen=True)
class FlipFlop(Task):
    name = "flipflop"
    primary_metric = "string_match_all"  # the headline metric: share of reads right (1 - the paper's read error rate)
    metrics = MULTI_ANSWER  # exact match and RULER's string_match_all / _part of its several answers
    answers_between_queries = True  # lm-eval asks one read at a time, even where the shortest example has one
    p_ignore: float = 0.8  # training distribution FFL(p_ignore), also the in-distribution split
    p_sparse: float = 0.98  # the sparse evaluation split: long write-to-read gaps
    p_dense: float = 0.1  # the dense evaluation split: short gaps, many reads

    def __post_init__(self):
        for param in ("p_ignore", "p_sparse", "p_dense"):
            value = getattr(self, param)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{self.name}.{param}={value}: must be in [0, 1]")

    def split_p(self, split: str) -> float:
        return {"in_dist": self.p_ignore, "sparse": self.p_sparse, "dense": self.p_dense}[split]

    def sample(self, rng: np.random.Generator, length: int, split: str) -> Example:
        """An FFL example of ``length`` tokens from the split's ignore probability."""
        if length < MIN_LENGTH:
            raise too_short(self.name, length, MIN_LENGTH)
        n = (length - 1) // 2
        p = self.split_p(split)
        ops = instructions(rng, n, p)
        bits = rng.integers(2, size=n).tolist()
        return program(ops, bits, length, split=split, p_ignore=p)

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        """Training data: FFL(p_ignore) only."""
        return self.sample(rng, length, "in_dist")

    def eval_generate(self, rng: np.random.Generator, length: int) -> Example:
        """Evaluation data: each example from a split drawn uniformly from ``SPLITS``."""
        return self.sample(rng, length, SPLITS[int(rng.integers(len(SPLITS)))])
