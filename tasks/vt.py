"""Variable tracking: name every variable that ends up holding a queried number.

RULER's multi-hop tracing task (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your
Long-Context Language Models?"). A chain starts with a variable assigned a number and goes on
for ``hops`` statements, each assigning the previous variable to a new one, so a chain has
``hops + 1`` variables (as in RULER, where ``num_hops`` counts the ``y = x`` links)::

    x = 5 .   y = x .   z = y .          (one chain, hops = 2: variables x, y, z)

``n_chains`` chains (one queried, the rest distractors with other numbers) are interleaved at
random, each keeping its own order; every variable is a distinct word and every chain has its
own number. Noise words (never a variable) fill the rest of the length at random places between
the statements. The query ``? hold V :`` names the queried chain's number V and is answered by
its variables in chain order, each its own span::

    <s> x = 5 . a = 9 . y = x . b = a . z = y . c = b . ? hold 5 : x y z

The defaults are RULER's own (one chain of four hops, ``num_chains=1, num_hops=4``): the noise
words are the distractors and the minimum length is 30. ``n_chains > 1`` adds distractor chains,
as in the example above (2 chains, 2 hops: minimum length 32, no noise); at the CPU default
scale (``tiny``, 2500 steps on the core mixture) that setting stays below 15% exact match for
every scheme, while the default is learned.
Slices: number of chains, and distance from the queried chain's first statement to the query.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.base import (
    ANSWER_ID, ASSIGN_ID, BOS_ID, DOT_ID, MULTI_ANSWER, NUMBER_IDS, QUERY_ID, TOKEN_ID, WORD_IDS, Builder, Example, Task, distance_bucket, scatter, too_short,
)

HOLD = TOKEN_ID["hold"]


@dataclass(frozen=True)
class VariableTracking(Task):
    name = "vt"
    primary_metric = "string_match_all"  # the headline metric: share of the chain's variables named (RULER's string_match_all)
    metrics = MULTI_ANSWER  # exact match and RULER's string_match_all / _part of its several answers
    n_chains: int = 1  # chains in the context: one queried, the others distractors
    hops: int = 4  # "y = x" links per chain; a chain has hops + 1 variables

    def __post_init__(self):
        if not isinstance(self.n_chains, int) or not 1 <= self.n_chains <= len(NUMBER_IDS):
            raise ValueError(f"vt.n_chains={self.n_chains}: must be an integer in [1, {len(NUMBER_IDS)}]")
        max_hops = (len(WORD_IDS) - 1) // self.n_chains - 1  # leave at least one noise word
        if not isinstance(self.hops, int) or not 1 <= self.hops <= max_hops:
            raise ValueError(f"vt.hops={self.hops}: must be an integer in [1, {max_hops}] "
                             f"with n_chains={self.n_chains}")

    def min_length(self) -> int:
        n_vars = self.hops + 1
        return 1 + 4 * n_vars * self.n_chains + 4 + n_vars  # <s>, statements, "? hold V :", answers

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        minimum = self.min_length()
        if length < minimum:
            raise too_short(self.name, length, minimum)
        n_vars = self.hops + 1
        names = rng.choice(WORD_IDS, size=(self.n_chains, n_vars), replace=False).tolist()
        numbers = rng.choice(NUMBER_IDS, size=self.n_chains, replace=False).tolist()
        chains = [
            [[chain[0], ASSIGN_ID, number, DOT_ID]]
            + [[chain[i], ASSIGN_ID, chain[i - 1], DOT_ID] for i in range(1, n_vars)]
            for chain, number in zip(names, numbers)
        ]
        # Interleave: a random order of chain ids, each chain's statements taken in turn.
        order = rng.permutation(np.repeat(np.arange(self.n_chains), n_vars)).tolist()
        taken = [0] * self.n_chains
        statements, owner = [], []
        for c in order:
            statements.append(chains[c][taken[c]])
            owner.append((c, taken[c]))
            taken[c] += 1
        noise_pool = np.setdiff1d(WORD_IDS, np.ravel(names))
        context, starts = scatter(rng, statements, length - minimum, noise_pool)
        asked = int(rng.integers(self.n_chains))

        b = Builder([BOS_ID])
        b.add(context)
        query = b.add([QUERY_ID, HOLD, numbers[asked], ANSWER_ID])
        for var in names[asked]:
            b.answer([var])
        first = 1 + starts[owner.index((asked, 0))]
        return b.example(
            slices={"n_keys": str(self.n_chains), "distance": distance_bucket(query - first)},
            n_chains=self.n_chains, hops=self.hops, asked=asked, first_pos=first,
        )
