"""Reverse: reproduce a random word sequence backwards after a separator.

A standard length-generalization probe (Zhou et al. 2024, "What Algorithms Can Transformers
Learn? A Study in Length Generalization"; one of the tasks of Kazemnejad et al. 2023):
``<s> w1 .. wn | wn .. w1``. Only the reversed sequence (and, with ``eos``, the closing ``</s>``)
is scored. The words are drawn exactly as in ``copy`` (``Copy.sequence``), so with ``distinct``
each word occurs once per ``alphabet`` words and its predecessor is unambiguous.
"""
from __future__ import annotations

from dataclasses import dataclass

from tasks.copy import Copy


@dataclass(frozen=True)
class Reverse(Copy):
    name = "reverse"
    primary_metric = "token_accuracy"  # the headline metric: share of answer tokens right, as for copy

    def target(self, seq: list[int]) -> list[int]:
        return seq[::-1]
