"""Natural text at byte level: language modelling on the pinned corpora of ``tasks.corpora``
(``code``: Python source; ``prose``: English documentation), scored on the same bytes at every length.

Tokens. Byte ``b`` is token ``BYTE_OFFSET + b``: the top 256 ids of the suite's vocabulary, above
every special token, so ``<s>`` stays distinct from every byte and one token is one byte (bits
per byte are exact).

Training. A training example is ``<s>`` followed by ``L - 1`` bytes of the training stream at a
uniform random start, every byte scored, so training's loss is the loss on every next byte.
Training windows have the training length exactly, as in the language-modelling papers (ALiBi,
Press et al. 2022, trains on fixed-length segments): the tasks declare ``fixed_length`` and the
spec builder sets ``train.min_len`` to null for a run of such tasks only.

Evaluation: the same target bytes at every length. ``n_examples`` target spans of ``target``
bytes are drawn once from the held-out stream by the eval seed (never by the length):
consecutive non-overlapping slots, each with ``CONTEXT_MAX`` held-out bytes before it, both ends
on UTF-8 character boundaries, kept in stream order. At length n an example is ``<s>``, then the
bytes before its target that fit (starting on a character boundary), then the target; only the
target is scored. Every length therefore scores byte-identical targets with a longer context, so
a change along the curve is context and extrapolation alone, not other bytes, and a longer window
no longer scores better by averaging its early, context-poor bytes in (the "early-token curse" of
ALiBi's appendix; Kazemnejad et al. 2023 score code the same way, on its last tokens).

Metrics (``suite.data.metrics``): ``bits_per_byte`` on the target bytes (the headline, lower is
better), token accuracy and loss on them, and ``bits_per_byte_at``: bits per byte at every position
of the windows, in log-spaced position bins, for the loss-against-position curve.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.base import BOS_ID, SPECIALS, VOCAB_SIZE, Example, Task, too_short
from tasks.corpora import PINNED, Corpus, checked

BYTE_OFFSET = VOCAB_SIZE - 256  # byte b is token BYTE_OFFSET + b
assert BYTE_OFFSET >= len(SPECIALS), "the vocabulary must hold every special token and all 256 bytes apart"
CONTEXT_MAX = 8192  # held-out bytes kept before every target, so eval lengths up to CONTEXT_MAX + target + 1 fit
TARGET_STREAM = 2  # the third entry of the targets' seed, apart from the other eval sets' streams
TARGET_MAX = 4096  # the most bytes a target may hold


def encode_bytes(data: bytes) -> list[int]:
    return [BYTE_OFFSET + b for b in data]


def decode_bytes(ids) -> bytes:
    """Token ids to bytes; a token that is not a byte (a special) is left out."""
    return bytes(int(i) - BYTE_OFFSET for i in ids if int(i) >= BYTE_OFFSET)


def _tokens(data: np.ndarray) -> list[int]:
    return [BOS_ID, *(BYTE_OFFSET + data.astype(np.int64)).tolist()]


def train_example(corpus: Corpus, rng: np.random.Generator, length: int) -> Example:
    """``<s>`` and a window of ``length - 1`` bytes of the training stream at a uniform random
    start, every byte scored."""
    size = length - 1
    if length < 2 or size > len(corpus.train):
        raise too_short(corpus.name, length, 2) if length < 2 else ValueError(
            f"{corpus.name}: a window of {size} bytes is longer than the training text ({len(corpus.train)} bytes)")
    start = int(rng.integers(0, len(corpus.train) - size + 1))
    return Example(tokens=_tokens(corpus.train[start : start + size]), answer_spans=[(1, length)],
                   meta={"start": start, "slices": {}})


def _boundary(data: np.ndarray, i: int) -> bool:
    """Whether byte offset ``i`` of ``data`` starts a UTF-8 character (or is the end)."""
    return i >= len(data) or (int(data[i]) & 0xC0) != 0x80


def target_ends(data: np.ndarray, target: int, seed: int, n: int) -> list[int]:
    """The ends of ``n`` target spans of ``target`` bytes in ``data``: of the consecutive slots
    after the first ``CONTEXT_MAX`` bytes, those whose ends are both UTF-8 boundaries, drawn by
    ``seed`` alone without replacement, in stream order."""
    ends = np.arange(CONTEXT_MAX + target, len(data) + 1, target)
    starts_char = (data[ends - target] & 0xC0) != 0x80  # the span's first byte starts a character
    ends_char = np.ones(len(ends), dtype=bool)  # the end of the text is a boundary
    inside = ends < len(data)
    ends_char[inside] = (data[ends[inside]] & 0xC0) != 0x80
    slots = ends[starts_char & ends_char].tolist()
    if len(slots) < n:
        raise ValueError(f"the held-out text ({len(data):,} bytes) holds {len(slots)} target spans of {target} bytes "
                         f"after {CONTEXT_MAX} bytes of context, fewer than the {n} asked for; lower eval.n_examples")
    chosen = np.random.default_rng([seed, target, TARGET_STREAM]).choice(len(slots), size=n, replace=False)
    return [slots[i] for i in np.sort(chosen)]


def target_example(data: np.ndarray, end: int, target: int, length: int) -> Example:
    """``<s>``, the bytes before ``end`` that fit in ``length`` tokens (from a character boundary,
    so up to 3 fewer), the last ``target`` of them scored."""
    start = end - (length - 1)
    while not _boundary(data, start):
        start += 1
    tokens = _tokens(data[start:end])
    return Example(tokens=tokens, answer_spans=[(len(tokens) - target, len(tokens))],
                   meta={"end": int(end), "context": int(end - target - start), "slices": {}})


def eval_examples(corpus: Corpus, target: int, length: int, seed: int, n: int) -> list[Example]:
    """``n`` held-out examples of at most ``length`` tokens ending on the same ``n`` targets at every length."""
    if length < target + 2:
        raise too_short(corpus.name, length, target + 2)
    if length > CONTEXT_MAX + target + 1:
        raise ValueError(f"{corpus.name}: eval length {length} is longer than its targets' context allows "
                         f"({CONTEXT_MAX} bytes of context and {target} target bytes: at most {CONTEXT_MAX + target + 1})")
    return [target_example(corpus.test, end, target, length) for end in target_ends(corpus.test, target, seed, n)]


@dataclass(frozen=True)
class TextLM(Task):
    """Language modelling on a pinned byte corpus (module docstring); ``corpus`` names it."""

    corpus = ""
    primary_metric = "bits_per_byte"
    metrics = ("bits_per_byte", "token_accuracy", "loss", "bits_per_byte_at")
    fixed_length = True  # trained at the training length only (module docstring)
    byte_level = True  # tokens are bytes: lm-eval documents are text, read byte by byte
    digest: str = ""
    target: int = 16  # bytes scored at the end of every evaluation example, the same bytes at every length

    def __post_init__(self):
        if not isinstance(self.target, int) or not 1 <= self.target <= TARGET_MAX:
            raise ValueError(f"{self.name}.target={self.target}: must be an integer in [1, {TARGET_MAX}]")
        checked(self.corpus, self.digest)

    @property
    def text(self) -> Corpus:
        return checked(self.corpus, self.digest)

    def corpus_record(self) -> dict:
        return self.text.record()

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        return train_example(self.text, rng, length)

    def eval_set(self, length: int, seed: int, n: int) -> list[Example]:
        return eval_examples(self.text, self.target, length, seed, n)


@dataclass(frozen=True)
class Code(TextLM):
    name = "code"
    corpus = "code"
    digest: str = PINNED["code"]  # the pinned corpus's content digest; another digest is another configuration


@dataclass(frozen=True)
class Prose(TextLM):
    name = "prose"
    corpus = "prose"
    digest: str = PINNED["prose"]  # the pinned corpus's content digest; another digest is another configuration
