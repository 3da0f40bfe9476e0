"""QA: answer a question about one of a few stated facts, among noise words.

RULER-style synthetic question answering (Hsieh et al. 2024, "RULER: What's the Real Context
Size of Your Long-Context Language Models?"), with the documents reduced to one-line facts::

    <s> .. the color of apple is 7 . .. the size of fox is 42 . .. ? what is the size of fox : 42

Each fact is ``the R of E is V .`` (7 tokens: R a relation, E an entity word, V a number);
the ``n_facts`` (R, E) pairs are distinct (an entity may recur with another relation, a relation
with another entity) and their values are distinct numbers. Noise words, never an entity of the
example, fill the rest of the length at random places between the facts, so a longer example
has the same facts in a longer haystack. The question ``? what is the R of E :`` asks about one
fact; its value is the single answer span. Slices: the asked fact's depth in the context and
its distance (in tokens) to the question.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.base import (
    ANSWER_ID, BOS_ID, DOT_ID, NUMBER_IDS, QUERY_ID, RELATION_IDS, TOKEN_ID, WORD_IDS, Builder, Example, Task, depth_bucket, distance_bucket, scatter, too_short,
)

THE, OF, IS, WHAT = (TOKEN_ID[w] for w in ("the", "of", "is", "what"))
FACT_LEN, QUESTION_LEN = 7, 8  # "the R of E is V ." and "? what is the R of E :"


@dataclass(frozen=True)
class QA(Task):
    name = "qa"
    primary_metric = "exact_match"  # the headline metric: the one answer right
    n_facts: int = 3  # facts in the context; one is asked about

    def __post_init__(self):
        if not isinstance(self.n_facts, int) or not 1 <= self.n_facts <= len(NUMBER_IDS):
            raise ValueError(f"qa.n_facts={self.n_facts}: must be an integer in [1, {len(NUMBER_IDS)}]")

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        minimum = 1 + FACT_LEN * self.n_facts + QUESTION_LEN + 1
        if length < minimum:
            raise too_short(self.name, length, minimum)
        pairs = rng.choice(len(RELATION_IDS) * len(WORD_IDS), size=self.n_facts, replace=False)
        relations = RELATION_IDS[pairs // len(WORD_IDS)]
        entities = WORD_IDS[pairs % len(WORD_IDS)]
        values = rng.choice(NUMBER_IDS, size=self.n_facts, replace=False)
        facts = [[THE, r, OF, e, IS, v, DOT_ID] for r, e, v in zip(relations, entities, values)]
        noise_pool = np.setdiff1d(WORD_IDS, entities)
        context, starts = scatter(rng, facts, length - minimum, noise_pool)
        asked = int(rng.integers(self.n_facts))

        b = Builder([BOS_ID])
        b.add(context)
        query = b.add([QUERY_ID, WHAT, IS, THE, relations[asked], OF, entities[asked], ANSWER_ID])
        b.answer([values[asked]])
        fact_pos = 1 + starts[asked]
        return b.example(
            slices={"depth": depth_bucket(starts[asked], len(context)),
                    "distance": distance_bucket(query - fact_pos)},
            n_facts=self.n_facts, asked=asked, fact_pos=fact_pos,
        )
