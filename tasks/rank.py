"""Candidate ranking: score a retrieval answer by the rank of the gold among candidates.

A needle-in-a-haystack context with ``n_pairs`` needles ``key = value`` (a key word, a number)
at random places among noise words (never a key), then the query for one key::

    <s> .. fox = 17 .. lamp = 3 .. ? fox : 17

The gold value is the single answer span, scored by exact match like any task. In addition
``meta["candidates"]`` lists ``n_candidates`` single-token answers (``[[id], [id], ..]``), the
gold at index ``meta["gold"]``; the distractors are the other needles' values first, then
random numbers, all distinct. A model ranks the candidates by their log-likelihood at the answer
position(s) and the ``reciprocal_rank`` metric (``suite.data.metrics``) turns that into the reciprocal rank,
whose mean over examples is the mean reciprocal rank of TREC QA (Voorhees 1999, "The TREC-8
Question Answering Track Report"). Ties count against the gold: its rank is 1 plus the number
of other candidates whose log-likelihood is >= the gold's. Slices: the queried needle's depth and
its distance to the query.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.base import (
    ANSWER_ID, ASSIGN_ID, BOS_ID, NUMBER_IDS, QUERY_ID, WORD_IDS, Builder, Example, Task, depth_bucket, distance_bucket, scatter, too_short,
)


@dataclass(frozen=True)
class CandidateRanking(Task):
    name = "rank"
    primary_metric = "reciprocal_rank"  # the headline metric: 1 / rank of the gold among the candidates
    metrics = ("exact_match", "reciprocal_rank", "token_accuracy", "loss")
    n_pairs: int = 2  # key = value needles in the context; one is queried
    n_candidates: int = 4  # candidate answers to rank, the gold among them

    def __post_init__(self):
        if not isinstance(self.n_pairs, int) or not 1 <= self.n_pairs <= len(NUMBER_IDS):
            raise ValueError(f"rank.n_pairs={self.n_pairs}: must be an integer in [1, {len(NUMBER_IDS)}]")
        if not isinstance(self.n_candidates, int) or not 2 <= self.n_candidates <= len(NUMBER_IDS):
            raise ValueError(f"rank.n_candidates={self.n_candidates}: must be an integer in [2, {len(NUMBER_IDS)}]")

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        minimum = 1 + 3 * self.n_pairs + 3 + 1  # <s>, needles, "? key :", value
        if length < minimum:
            raise too_short(self.name, length, minimum)
        keys = rng.choice(WORD_IDS, size=self.n_pairs, replace=False).tolist()
        values = rng.choice(NUMBER_IDS, size=self.n_pairs, replace=False).tolist()
        needles = [[k, ASSIGN_ID, v] for k, v in zip(keys, values)]
        context, starts = scatter(rng, needles, length - minimum, np.setdiff1d(WORD_IDS, keys))
        asked = int(rng.integers(self.n_pairs))

        b = Builder([BOS_ID])
        b.add(context)
        query = b.add([QUERY_ID, keys[asked], ANSWER_ID])
        b.answer([values[asked]])

        gold = values[asked]
        others = values[:asked] + values[asked + 1 :]
        rest = rng.permutation(np.setdiff1d(NUMBER_IDS, values)).tolist()
        distractors = (others + rest)[: self.n_candidates - 1]
        at = int(rng.integers(self.n_candidates))
        candidates = distractors[:at] + [gold] + distractors[at:]
        needle_pos = 1 + starts[asked]
        return b.example(
            slices={"depth": depth_bucket(starts[asked], len(context)),
                    "distance": distance_bucket(query - needle_pos)},
            candidates=[[c] for c in candidates], gold=at, n_pairs=self.n_pairs, needle_pos=needle_pos,
        )
