"""Task protocol, shared word vocabulary and text rendering.

Every PosBench example exists twice: as token ids (a tiny model trains on these) and as
readable text (people, lm-eval and pretrained models read this). The two are tied by a
whitespace tokenizer over one fixed vocabulary, so ``decode(encode(text)) == text`` exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Optional

import numpy as np

# Special tokens. Each is a single whitespace-free string so the text form stays exact.
PAD, BOS, EOS, SEP, QUERY, ANSWER, ASSIGN, DOT, COMMA = (
    "<pad>", "<s>", "</s>", "|", "?", ":", "=", ".", ",",
)
SPECIALS = [PAD, BOS, EOS, SEP, QUERY, ANSWER, ASSIGN, DOT, COMMA]

# Numbers 0..99 as single tokens (values, counts, variable payloads).
NUMBERS = [str(i) for i in range(100)]

# Content words: short, common English nouns, so any reader (or a pretrained model) sees words.
WORDS = """
apple arm baby back ball bank bear bed bell bird boat body bone book boot bowl box boy bread
brick bridge brush bus cake camp car card cat chair chalk cheese chest child city clock cloud
coat coin corn cow cup desk dog door dress drum duck dust ear earth egg eye face farm fish
flag floor flower fly foot fork fox frog game garden gate girl glass glove goat gold grass
hair hand hat head heart hill horse house ice iron jam jar key king kite knee knife lake lamp
leaf leg lion lip lock map milk moon mouse mouth nail neck nest net nose nut oil owl page pan
paper park pen pig pin pipe plane plate pot queen rain ring river road rock roof room root
rope rose sail salt sand seed sheep shelf ship shirt shoe sky snake snow sock song spoon star
stone sun table tail tea tent tiger toe tooth town toy train tree truck van wall watch water
wave wheel whip wind window wing wire wolf wood wool worm yard zebra
""".split()

# Relations for fact-style tasks ("the color of apple is 7 .") and the few function words that
# make prompts read as text. They are never drawn as keys, values or noise.
RELATIONS = "color size age price weight height speed owner".split()
FUNCTION_WORDS = "the of is what which common frequent hold".split()

VOCAB: list[str] = SPECIALS + NUMBERS + WORDS + RELATIONS + FUNCTION_WORDS
TOKEN_ID: dict[str, int] = {tok: i for i, tok in enumerate(VOCAB)}
assert len(TOKEN_ID) == len(VOCAB), "vocabulary entries must be unique"

VOCAB_SIZE = len(VOCAB)
PAD_ID, BOS_ID, EOS_ID, SEP_ID = (TOKEN_ID[t] for t in (PAD, BOS, EOS, SEP))
QUERY_ID, ANSWER_ID, ASSIGN_ID, DOT_ID, COMMA_ID = (
    TOKEN_ID[t] for t in (QUERY, ANSWER, ASSIGN, DOT, COMMA)
)
NUMBER_IDS = np.array([TOKEN_ID[t] for t in NUMBERS])
WORD_IDS = np.array([TOKEN_ID[t] for t in WORDS])
RELATION_IDS = np.array([TOKEN_ID[t] for t in RELATIONS])
CONTENT_IDS = np.concatenate([WORD_IDS, NUMBER_IDS])  # every non-special token


def encode(text: str) -> list[int]:
    """Text to token ids with the whitespace tokenizer; an unknown word is an error."""
    ids = []
    for word in text.split():
        if word not in TOKEN_ID:
            raise ValueError(f"word {word!r} is not in the PosBench vocabulary")
        ids.append(TOKEN_ID[word])
    return ids


def decode(ids) -> str:
    """Token ids to text: words joined by single spaces."""
    return " ".join(VOCAB[int(i)] for i in ids)


@dataclass
class Example:
    """One task instance: the prompt followed by the answer, and where the answer lies."""

    tokens: list[int]
    answer_spans: list[tuple[int, int]]  # [start, end) token positions that are scored
    meta: dict = field(default_factory=dict)  # slice keys: depth, number of keys, distance, ...

    @property
    def text(self) -> str:
        return decode(self.tokens)

    @property
    def answers(self) -> list[str]:
        return [decode(self.tokens[s:e]) for s, e in self.answer_spans]


# the metrics of a task with several answers per example: exact match (every answer right) and RULER's
# string_match_all / string_match_part (the share of its answers found / any found; Hsieh et al. 2024)
MULTI_ANSWER = ("exact_match", "string_match_all", "string_match_part", "token_accuracy", "loss")


class Task:
    """A seeded generator and the metrics that score it, independent of any model. A task is a
    frozen dataclass subclassing this class, one file in ``tasks/`` with one YAML in ``conf/task/``.

    It must define ``name``, ``primary_metric`` and ``generate``; every other member is an optional
    hook declared here with its default, so callers read it as it is and never look for it."""

    name: ClassVar[str]
    primary_metric: ClassVar[str]  # the headline metric the leaderboard ranks by, one of ``metrics``
    # the metrics evaluation scores it by, by name (``suite.data.metrics``); a length the scheme
    # cannot represent marks each of them '-'
    metrics: ClassVar[tuple[str, ...]] = ("exact_match", "token_accuracy", "loss")
    fixed_length: ClassVar[bool] = False  # trained at the training length only (natural text), not at varied lengths
    byte_level: ClassVar[bool] = False  # tokens are bytes: lm-eval documents are text read byte by byte
    answers_between_queries: ClassVar[bool] = False  # lm-eval asks one answer at a time, even where an example has one

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        """One training example of ``length`` tokens."""
        raise NotImplementedError

    def eval_generate(self, rng: np.random.Generator, length: int) -> Example:
        """One evaluation example: a distribution the task is evaluated on but not trained on
        (flip-flop's splits); by default the training distribution."""
        return self.generate(rng, length)

    def eval_set(self, length: int, seed: int, n: int) -> Optional[list[Example]]:
        """A whole evaluation set drawn at once (natural text's held-out windows), or None: ``n``
        draws of ``eval_generate``."""
        return None

    def corpus_record(self) -> Optional[dict]:
        """What a run stores about the corpus the task reads (natural text), or None."""
        return None


# ------------------------------------------------------------------------------------------
# building examples of an exact length


def depth_bucket(position: int, context_len: int, n_buckets: int = 5) -> str:
    """Needle depth as a fraction of the context, bucketed: '0.0', '0.2', ... '0.8'."""
    frac = min(max(position / max(context_len, 1), 0.0), 0.999)
    return f"{int(frac * n_buckets) / n_buckets:.1f}"


def distance_bucket(distance: int) -> str:
    """Distance in tokens bucketed by powers of two: '<8', '<16', '<32', ..."""
    bound = 8
    while distance >= bound:
        bound *= 2
    return f"<{bound}"


class Builder:
    """Accumulates tokens and marks answer spans: ``b.add(ids)``, ``b.answer(ids)``."""

    def __init__(self, tokens: list[int] | None = None):
        self.tokens: list[int] = list(tokens or [])
        self.spans: list[tuple[int, int]] = []

    def add(self, ids) -> int:
        """Append tokens; returns the position of the first one."""
        start = len(self.tokens)
        self.tokens.extend(int(i) for i in ids)
        return start

    def answer(self, ids) -> int:
        start = self.add(ids)
        self.spans.append((start, len(self.tokens)))
        return start

    def __len__(self) -> int:
        return len(self.tokens)

    def example(self, **meta) -> Example:
        return Example(tokens=self.tokens, answer_spans=self.spans, meta=meta)


def scatter(rng: np.random.Generator, blocks: list[list[int]], n_noise: int, noise_pool,
            cuts=None) -> tuple[list[int], list[int]]:
    """The blocks, in order, with ``n_noise`` noise tokens (drawn from ``noise_pool``) spread at
    random into the gaps before, between and after them; ``cuts`` (sorted noise indices) pins
    where each block goes. Returns the tokens and each block's offset in them."""
    if cuts is None:
        cuts = np.sort(rng.integers(0, n_noise + 1, size=len(blocks)))
    gaps = np.diff(np.concatenate([[0], cuts, [n_noise]]))
    noise = rng.choice(noise_pool, size=n_noise).tolist()
    tokens: list[int] = []
    starts: list[int] = []
    used = 0
    for gap, block in zip(gaps, blocks):
        tokens.extend(noise[used : used + gap])
        used += gap
        starts.append(len(tokens))
        tokens.extend(int(t) for t in block)
    tokens.extend(noise[used:])
    return tokens, starts


def too_short(task: str, length: int, minimum: int) -> ValueError:
    return ValueError(f"{task} needs length >= {minimum} with these settings, got {length}")
