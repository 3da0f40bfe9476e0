"""The permutation word problem: compose a sequence of elements of S3 or S5, report the result.

After Merrill, Petty and Sabharwal 2024, "The Illusion of State in State-Space Models" (ICML),
which uses the word problem of a finite group as the test of state tracking: composing elements of
S3 (solvable) or S5 (not solvable; its word problem is NC1-complete, Barrington 1989) left to
right, where a constant-depth reader without a data-dependent state cannot follow S5 at every
length. Parity (``tasks.parity``) is the word problem of Z2.

The arrangement of ``degree`` items starts in order; each element ``a`` (in one-line notation)
rearranges it, so place j takes what place a[j] held. A read ``?`` is followed by the arrangement
so far. The groups, as PosBench's vocabulary (numbers 0-99) can write them:

* ``s3``: the six elements of S3, each one number (its index in lexicographic one-line order, 0
  the identity); a read answers with the index of the arrangement, one token.
* ``s5``: S5 through its four adjacent transpositions (number i swaps places i and i + 1; they
  generate S5, and a word problem's difficulty is its group's, whatever the generators); a read
  answers with the arrangement, five numbers, one span scored as a whole::

    <s> 3 0 2 ? 1 0 2 4 3

Reads come after every ``every``-th element and after the last (``every`` = 0: after the last
only). An answer stays in the context of later reads, so with ``every`` > 0 a reader may carry it
and compose only the elements since; the default, ``every`` = 0, asks for the whole word in one
read. Headline: ``string_match_all``, the share of an example's reads right.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations

import numpy as np

from tasks.base import BOS_ID, EOS_ID, MULTI_ANSWER, NUMBER_IDS, QUERY_ID, Builder, Example, Task, too_short
from tasks.parity import check_every, n_items, reads


@dataclass(frozen=True)
class Group:
    degree: int
    elements: tuple  # the input elements in one-line notation; element i is written as the number i
    by_index: bool  # a read writes the arrangement's index in ``elements`` (else its ``degree`` numbers)

    @property
    def answer_width(self) -> int:
        return 1 if self.by_index else self.degree

    def write(self, state: tuple) -> list[int]:
        if self.by_index:
            return [int(NUMBER_IDS[self.elements.index(state)])]
        return [int(NUMBER_IDS[x]) for x in state]


def adjacent_swap(i: int, degree: int) -> tuple:
    order = list(range(degree))
    order[i], order[i + 1] = order[i + 1], order[i]
    return tuple(order)


GROUPS = {"s3": Group(3, tuple(permutations(range(3))), True),
          "s5": Group(5, tuple(adjacent_swap(i, 5) for i in range(4)), False)}


def compose(state: tuple, element: tuple) -> tuple:
    """The arrangement ``state`` after ``element``: place j takes what place element[j] held."""
    return tuple(state[a] for a in element)


@dataclass(frozen=True)
class Permutation(Task):
    name = "permutation"
    primary_metric = "string_match_all"  # share of reads right (one read: exact match)
    metrics = MULTI_ANSWER  # exact match and RULER's string_match_all / _part of its several answers
    group: str = "s3"
    every: int = 0  # a read after every this many elements and after the last; 0: after the last only

    def __post_init__(self):
        if self.group not in GROUPS:
            raise ValueError(f"{self.name}.group={self.group!r}: unknown group; valid: {', '.join(GROUPS)}")
        check_every(self.name, self.every)

    @property
    def answers_between_queries(self) -> bool:
        return self.every > 0

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        group = GROUPS[self.group]
        minimum = 3 + group.answer_width  # <s> a ? answer
        if length < minimum:
            raise too_short(self.name, length, minimum)
        m = n_items(length, self.every, group.answer_width)
        word = rng.integers(len(group.elements), size=m).tolist()
        b = Builder([BOS_ID])
        state, done = tuple(range(group.degree)), 0
        for mark in reads(m, self.every):
            for element in word[done:mark]:
                b.add([int(NUMBER_IDS[element])])
                state = compose(state, group.elements[element])
            b.add([QUERY_ID])
            b.answer(group.write(state))
            done = mark
        b.add([EOS_ID] * (length - len(b)))
        return b.example(group=self.group, n_elements=m, every=self.every, slices={})
