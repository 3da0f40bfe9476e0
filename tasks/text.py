"""Natural text at byte level: pinned corpora of Python source (``code``) and English prose
(``prose``), and the language-modelling tasks that read them.

Corpora. Both ship with the Python interpreter that ``make install`` builds the environment
from, so nothing is downloaded and no corpus text lives in this repository:

* ``code``: the interpreter's standard library, every ``*.py`` file under its ``stdlib`` folder
  (``sysconfig``) outside ``site-packages`` and outside test folders (``test``, ``tests``,
  ``idle_test``, ``test_*``), one document per file, named by its path there, in sorted order.
* ``prose``: the Python reference documentation's topic texts that ``pydoc`` shows
  (``pydoc_data.topics``: English prose, PSF licence), one document per topic, sorted by name.

A corpus is pinned by its SHA-256 content digest over every document's name and bytes, in order
(``content_digest``). A task states the digest it expects (its ``digest`` option, the one of the
interpreter the project pins, ``PINNED``), so the digest is in the run spec and a run on other text
is another run and another leaderboard cell. A missing corpus, or one with another digest, is
refused when the task is built, before any training, naming both digests and how to get the
pinned one.

Split by document: a document is held out when the first 8 hex digits of SHA-256 of its name,
read as a fraction of 2**32, fall below ``HELD_OUT`` (deterministic, independent of the order and
of the other documents). Each side is one byte stream, its documents in order with a newline after
each; training windows come from the training stream only, evaluation windows from the held-out
stream only, so no held-out byte ever reaches training.

Tokens. Byte ``b`` is token ``BYTE_OFFSET + b``: the top 256 ids of the suite's vocabulary, above
every special token, so ``<s>`` stays distinct from every byte and one token is one byte (bits
per byte are exact). An example is ``<s>`` followed by ``length - 1`` bytes, and every byte is
scored (its answer span is all of it), so training's loss is the loss on every next byte.

Protocol. Training windows have the training length exactly, as in the language-modelling papers
(ALiBi, Press et al. 2022, trains on fixed-length segments), not varied as the synthetic tasks
are: the past-training-length metric is then exact (no trained example ever reaches a position
at or past L), and every step trains on L bytes. The tasks declare ``fixed_length`` and the
spec builder sets ``train.min_len`` to null for a run of such tasks only. Evaluation, at each
length n: ALiBi's non-overlapping windows of the held-out stream, ``n - 1`` bytes each: of the
stream's consecutive windows, those that start and end on a UTF-8 character boundary (so each is
text a reader, lm-eval or a pretrained model can read), ``n_examples`` of them drawn by the eval
seed without replacement and kept in stream order.

Metrics, both lower is better (``suite.results.metrics``): ``bits_per_byte``, the mean over a
window's bytes of -log2 p(byte | the bytes before it in the window), averaged over windows (they
hold equal byte counts, so this is the pooled value); and ``bits_per_byte_past_train``, the same
over the positions at or past the training length only (positions L .. n - 1 of the window, which
no training window reaches), reported at eval lengths above L.
"""
from __future__ import annotations

import hashlib
import platform
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from tasks.base import BOS_ID, SPECIALS, VOCAB_SIZE, Example, Task, too_short

BYTE_OFFSET = VOCAB_SIZE - 256  # byte b is token BYTE_OFFSET + b
assert BYTE_OFFSET >= len(SPECIALS), "the vocabulary must hold every special token and all 256 bytes apart"
HELD_OUT = 0.2  # the share of documents held out (by hash of the name)
PINNED_PYTHON = "3.11.7"  # the interpreter whose corpora PINNED names


def encode_bytes(data: bytes) -> list[int]:
    return [BYTE_OFFSET + b for b in data]


def decode_bytes(ids) -> bytes:
    """Token ids to bytes; a token that is not a byte (a special) is left out."""
    return bytes(int(i) - BYTE_OFFSET for i in ids if int(i) >= BYTE_OFFSET)


# ------------------------------------------------------------------------------------------
# sources


def _is_test(parts: tuple[str, ...]) -> bool:
    return any(p in ("test", "tests", "idle_test") or p.startswith("test_") for p in parts)


def stdlib_code() -> list[tuple[str, bytes]]:
    """(path, bytes) of each non-test ``*.py`` file of this interpreter's standard library, sorted;
    not ``_sysconfigdata*.py``, which the interpreter's build writes (its configure flags and paths),
    so the corpus is the same on every build of the pinned version."""
    root = Path(sysconfig.get_paths()["stdlib"])
    docs = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).parts
        if path.suffix != ".py" or not path.is_file() or "site-packages" in rel or "dist-packages" in rel or _is_test(rel) \
                or path.name.startswith("_sysconfigdata"):
            continue
        docs.append(("/".join(rel), path.read_bytes()))
    return sorted(docs)


def pydoc_topics() -> list[tuple[str, bytes]]:
    """(topic, UTF-8 text) of each topic of ``pydoc_data.topics``, sorted by topic."""
    from pydoc_data.topics import topics

    return sorted((name, text.encode("utf-8")) for name, text in topics.items())


@dataclass(frozen=True)
class Source:
    what: str  # where the documents come from
    licence: str
    read: Callable[[], list[tuple[str, bytes]]]


SOURCES: dict[str, Source] = {
    "code": Source("the Python standard library's *.py files, tests excluded", "PSF-2.0", stdlib_code),
    "prose": Source("the Python reference documentation topics (pydoc_data.topics)", "PSF-2.0", pydoc_topics),
}
# the content digests of the corpora of Python PINNED_PYTHON (``describe`` prints them)
PINNED = {
    "code": "c4ff3e09fdbe634d2625808267d20390ee5f36094bc88d2e6b6dfdb41e8b84fb",
    "prose": "e4fd89fdce8e3906e11e9d946a0abda202c914d05f55f6adaffa1dca8a426e99",
}


# ------------------------------------------------------------------------------------------
# a corpus


def content_digest(docs: list[tuple[str, bytes]]) -> str:
    """SHA-256 over each document's name and bytes, in order, each length-prefixed."""
    h = hashlib.sha256()
    for name, data in docs:
        raw = name.encode("utf-8")
        h.update(len(raw).to_bytes(8, "big") + raw + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def held_out(name: str) -> bool:
    """Whether the document ``name`` is held out (``HELD_OUT`` of names, by their SHA-256)."""
    return int(hashlib.sha256(name.encode("utf-8")).hexdigest()[:8], 16) < HELD_OUT * 2 ** 32


def stream(docs: list[tuple[str, bytes]]) -> np.ndarray:
    """The documents' bytes in order, a newline after each, as uint8."""
    return np.frombuffer(b"".join(data + b"\n" for _, data in docs), dtype=np.uint8)


@dataclass(frozen=True, eq=False)
class Corpus:
    name: str
    documents: tuple[str, ...]
    held_out: tuple[str, ...]  # the held-out documents' names
    digest: str
    n_bytes: int
    train: np.ndarray  # the training stream (uint8)
    test: np.ndarray  # the held-out stream (uint8)

    @classmethod
    def of(cls, name: str, docs: list[tuple[str, bytes]]) -> "Corpus":
        out = [d for d in docs if held_out(d[0])]
        kept = [d for d in docs if not held_out(d[0])]
        if not out or not kept:
            raise ValueError(f"corpus {name!r}: its {len(docs)} documents split into {len(kept)} for training and "
                             f"{len(out)} held out; each side needs one")
        return cls(name, tuple(n for n, _ in docs), tuple(n for n, _ in out), content_digest(docs),
                   sum(len(d) for _, d in docs), stream(kept), stream(out))

    def record(self) -> dict:
        """What a run stores about its corpus: digest, size, and the training and held-out documents."""
        held = set(self.held_out)
        return {"name": self.name, "digest": self.digest, "bytes": self.n_bytes, "train_bytes": len(self.train),
                "held_out_bytes": len(self.test), "train_documents": [d for d in self.documents if d not in held],
                "held_out_documents": list(self.held_out)}


class CorpusRefused(ValueError):
    """The corpus on this machine is missing or is not the one a task pins."""


def _how_to_install(name: str) -> str:
    return (f"the pinned {name!r} corpus is {SOURCES[name].what} of Python {PINNED_PYTHON}, which ships with that "
            f"interpreter: create the environment with it (make install PYTHON=python{PINNED_PYTHON.rsplit('.', 1)[0]}, "
            f"a Python {PINNED_PYTHON}), or set task.digest to the digest found to run on this text as another "
            "configuration")


@lru_cache(maxsize=None)
def load(name: str) -> Corpus:
    """The corpus ``name`` as this machine has it (read once per process)."""
    if name not in SOURCES:
        raise ValueError(f"unknown corpus {name!r}; valid: {', '.join(sorted(SOURCES))}")
    try:
        docs = SOURCES[name].read()
    except (OSError, ImportError) as err:
        raise CorpusRefused(f"corpus {name!r} is missing ({type(err).__name__}: {err}); "
                            f"expected digest {PINNED.get(name)}; {_how_to_install(name)}") from None
    if not docs:
        raise CorpusRefused(f"corpus {name!r} is missing (no documents found); expected digest {PINNED.get(name)}; "
                            f"{_how_to_install(name)}")
    return Corpus.of(name, docs)


def checked(name: str, digest: str) -> Corpus:
    """The corpus ``name``, refused unless its content digest is ``digest``."""
    corpus = load(name)
    if corpus.digest != digest:
        raise CorpusRefused(
            f"corpus {name!r} has another content digest than the task pins: expected {digest}, found "
            f"{corpus.digest} ({len(corpus.documents)} documents, {corpus.n_bytes:,} bytes, read from Python "
            f"{platform.python_version()}); {_how_to_install(name)}")
    return corpus


# ------------------------------------------------------------------------------------------
# windows


def window_example(data: np.ndarray, start: int, length: int) -> Example:
    """``<s>`` then the ``length - 1`` bytes of ``data`` from ``start``, every byte scored."""
    tokens = [BOS_ID, *(BYTE_OFFSET + data[start : start + length - 1].astype(np.int64)).tolist()]
    return Example(tokens=tokens, answer_spans=[(1, length)], meta={"start": int(start), "slices": {}})


def train_example(corpus: Corpus, rng: np.random.Generator, length: int) -> Example:
    """A window of the training stream at a uniform random start."""
    size = length - 1
    if length < 2 or size > len(corpus.train):
        raise too_short(corpus.name, length, 2) if length < 2 else ValueError(
            f"{corpus.name}: a window of {size} bytes is longer than the training text ({len(corpus.train)} bytes)")
    return window_example(corpus.train, int(rng.integers(0, len(corpus.train) - size + 1)), length)


def _boundary(data: np.ndarray, i: int) -> bool:
    """Whether byte offset ``i`` of ``data`` starts a UTF-8 character (or is the end)."""
    return i >= len(data) or (int(data[i]) & 0xC0) != 0x80


def readable_windows(data: np.ndarray, size: int) -> list[int]:
    """Starts of the consecutive non-overlapping windows of ``size`` bytes whose both ends are
    UTF-8 character boundaries."""
    return [s for s in range(0, len(data) - size + 1, size) if _boundary(data, s) and _boundary(data, s + size)]


def eval_examples(corpus: Corpus, length: int, seed: int, n: int) -> list[Example]:
    """``n`` non-overlapping held-out windows of ``length`` tokens (module docstring)."""
    size = length - 1
    if length < 2:
        raise too_short(corpus.name, length, 2)
    starts = readable_windows(corpus.test, size)
    if len(starts) < n:
        raise ValueError(f"{corpus.name}: the held-out text ({len(corpus.test):,} bytes) holds {len(starts)} "
                         f"non-overlapping windows of {size} bytes, fewer than the {n} asked for; lower eval.n_examples "
                         "or the eval length")
    rng = np.random.default_rng([seed, length])
    chosen = np.sort(rng.choice(len(starts), size=n, replace=False))
    return [window_example(corpus.test, starts[i], length) for i in chosen]


# ------------------------------------------------------------------------------------------
# the tasks


@dataclass(frozen=True)
class TextLM(Task):
    """Language modelling on a pinned byte corpus (module docstring); ``corpus`` names it."""

    corpus = ""
    primary_metric = "bits_per_byte"
    metrics = ("bits_per_byte", "bits_per_byte_past_train", "token_accuracy", "loss")
    fixed_length = True  # trained at the training length only (module docstring)
    byte_level = True  # tokens are bytes: lm-eval documents are text, read byte by byte
    digest: str = ""

    def __post_init__(self):
        checked(self.corpus, self.digest)

    @property
    def text(self) -> Corpus:
        return checked(self.corpus, self.digest)

    def corpus_record(self) -> dict:
        return self.text.record()

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        return train_example(self.text, rng, length)

    def eval_set(self, length: int, seed: int, n: int) -> list[Example]:
        return eval_examples(self.text, length, seed, n)


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


def describe(name: str) -> str:
    c = load(name)
    return (f"{name}: {SOURCES[name].what}, Python {platform.python_version()}, licence {SOURCES[name].licence}; "
            f"{len(c.documents)} documents, {c.n_bytes:,} bytes; digest {c.digest}; held out {len(c.held_out)} "
            f"documents ({len(c.test):,} bytes of stream), training {len(c.documents) - len(c.held_out)} documents "
            f"({len(c.train):,} bytes of stream)")
