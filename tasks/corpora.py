"""The pinned byte corpora natural-text tasks read: Python source (``code``) and English prose
(``prose``). No corpus text lives in this repository and nothing is downloaded at run time.

* ``code``: the interpreter's standard library, every ``*.py`` file under its ``stdlib`` folder
  (``sysconfig``) outside ``site-packages`` and test folders (``test``, ``tests``, ``idle_test``,
  ``test_*``), one document per file, named by its path there, in sorted order. Data tables leave
  it, as whole groups or module by module: the ``encodings`` package (codec tables), the
  ``pydoc_data`` package (the documentation's topic texts, which are prose), and every module whose
  bytes are mostly module-level literal tables (``data_table``: ``html/entities.py``,
  ``stringprep.py``, ``token.py``, ...), so the corpus is code and its held-out files do not
  repeat the training tables byte for byte.
* ``prose``: the reStructuredText sources of the Python 3.11 documentation as Debian ships them in
  the ``python3.11-doc`` package (``usr/share/doc/python3.11/html/_sources/**/*.rst.txt``; PSF
  licence; about 11 MB of English), one document per file. ``make corpora`` (run by ``make
  install``) fetches that package with ``apt-get download`` and unpacks it under
  ``.cache/corpora`` without installing it; a system-wide ``apt-get install python3.11-doc`` serves
  too (``PROSE_ROOTS``).

A corpus is pinned by its SHA-256 content digest over every document's name and bytes, in order
(``content_digest``). A task states the digest it expects (its ``digest`` option, ``PINNED``), so
the digest is in the run spec and a run on other text is another run and another leaderboard cell.
A missing corpus, or one with another digest, is refused when the task is built, naming both
digests and how to get the pinned one.

Split by document: a document is held out when the first 8 hex digits of SHA-256 of its name, read
as a fraction of 2**32, fall below ``HELD_OUT``. Each side is one byte stream, its documents in
order with a newline after each, so no held-out byte ever reaches training. ``overlap`` measures
what the split cannot rule out: the share of the held-out stream's ``NGRAM``-byte sequences that
also occur in the training stream (shared licence headers, boilerplate, quoted examples); each run
stores it with its corpus and the report prints it.
"""
from __future__ import annotations

import ast
import hashlib
import os
import platform
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from suite.registry import package_modules

HELD_OUT = 0.2  # the share of documents held out (by hash of the name)
NGRAM = 32  # the byte length of the sequences ``overlap`` looks for in training
DATA_SHARE = 0.5  # a module whose module-level literal assignments hold at least this share of its bytes is a table
DATA_BYTES = 2048  # ... and at least this many bytes (a short ``__all__`` list is no table)
DATA_PACKAGES = ("encodings", "pydoc_data")  # standard-library packages of tables and prose, left out of code whole
PINNED_PYTHON = "3.11.7"  # the interpreter whose standard library the code corpus pins
PROSE_PACKAGE = "python3.11-doc"  # the Debian package whose documentation sources the prose corpus pins
PROSE_SOURCES = Path("usr/share/doc/python3.11/html/_sources")
CACHE = Path(__file__).resolve().parents[1] / ".cache" / "corpora"  # where make corpora unpacks the package


def _is_test(parts: tuple[str, ...]) -> bool:
    return any(p in ("test", "tests", "idle_test") or p.startswith("test_") for p in parts)


def data_table(source: bytes) -> bool:
    """Whether a module is a data table: at least ``DATA_SHARE`` of its bytes, and ``DATA_BYTES``,
    lie in module-level assignments of a literal (a dict, list, tuple, set or string display, or a
    call on such displays only), as a codec map or an entity table does. ``DATA_MODULES`` is what
    it finds in the pinned standard library (tests/test_text.py holds the two equal), so a run
    does not parse the whole library."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    ends = np.cumsum([0] + [len(line) for line in source.splitlines(keepends=True)])
    literal = (ast.Dict, ast.List, ast.Tuple, ast.Set, ast.Constant)
    held = 0
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, literal) or (isinstance(value, ast.Call) and value.args
                                          and all(isinstance(a, literal) for a in value.args)):
            held += int(ends[node.end_lineno] - ends[node.lineno - 1])
    return held >= max(DATA_SHARE * len(source), DATA_BYTES)


# the modules of the pinned standard library outside DATA_PACKAGES that ``data_table`` finds
DATA_MODULES = frozenset({
    "_compat_pickle.py", "curses/has_key.py", "html/__init__.py", "html/entities.py", "idlelib/mainmenu.py",
    "locale.py", "re/_casefix.py", "re/_constants.py", "stat.py", "stringprep.py",
})


def stdlib_modules() -> list[tuple[str, Path]]:
    """(path under the standard library, file) of each module that may be code: no tests, no
    ``_sysconfigdata*.py`` (the build's configure flags and paths), nothing in ``DATA_PACKAGES``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in package_modules(root):
        rel = path.relative_to(root).parts
        if path.is_file() and "site-packages" not in rel and "dist-packages" not in rel and not _is_test(rel) \
                and rel[0] not in DATA_PACKAGES and not path.name.startswith("_sysconfigdata"):
            out.append(("/".join(rel), path))
    return sorted(out)


def stdlib_code() -> list[tuple[str, bytes]]:
    """(path, bytes) of each code module of this interpreter's standard library, sorted: those of
    ``stdlib_modules`` less the tables of ``DATA_MODULES``."""
    return [(name, path.read_bytes()) for name, path in stdlib_modules() if name not in DATA_MODULES]


def prose_roots() -> list[Path]:
    """Where the prose sources are looked for, in order: ``$POSBENCH_CORPORA``, the project's
    ``.cache/corpora`` (``make corpora``), the system's (``apt-get install python3.11-doc``)."""
    roots = [Path(os.environ["POSBENCH_CORPORA"])] if os.environ.get("POSBENCH_CORPORA") else []
    return [*(r / PROSE_PACKAGE / PROSE_SOURCES for r in [*roots, CACHE]), Path("/") / PROSE_SOURCES]


def python_docs() -> list[tuple[str, bytes]]:
    """(path, bytes) of each ``*.rst.txt`` source of the Python 3.11 documentation, sorted by path
    under ``_sources``; FileNotFoundError when no root of ``prose_roots`` holds them."""
    for root in prose_roots():
        files = sorted(root.rglob("*.rst.txt")) if root.is_dir() else []
        if files:
            return [(f.relative_to(root).as_posix(), f.read_bytes()) for f in files]
    raise FileNotFoundError(f"no *.rst.txt under any of {', '.join(map(str, prose_roots()))}")


@dataclass(frozen=True)
class Source:
    what: str  # where the documents come from
    licence: str
    read: Callable[[], list[tuple[str, bytes]]]
    install: str  # how to get the pinned corpus onto a machine that lacks it


SOURCES: dict[str, Source] = {
    "code": Source(f"the Python {PINNED_PYTHON} standard library's *.py files, tests and data tables excluded",
                   "PSF-2.0", stdlib_code,
                   f"create the environment with Python {PINNED_PYTHON} (make install PYTHON=python3.11)"),
    "prose": Source(f"the Python 3.11 documentation's reStructuredText sources (Debian {PROSE_PACKAGE})",
                    "PSF-2.0", python_docs,
                    f"run make corpora (apt-get download {PROSE_PACKAGE}, unpacked under .cache/corpora), or "
                    f"apt-get install {PROSE_PACKAGE}"),
}
# the content digests of the pinned corpora (``python -m tasks.corpora`` prints them)
PINNED = {
    "code": "2359c7cce57cf9e37bf912aab101cba622a61cbe58adf4407278c67e35ed62f7",
    "prose": "71d5a848ee0642f92e1b841928ee5cee589c29b977fe631801f8c82b22173ea4",
}


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


def ngram_hashes(data: np.ndarray, n: int = NGRAM) -> np.ndarray:
    """(len(data) - n + 1,) a 64-bit polynomial hash of every ``n``-byte window of ``data``
    (arithmetic mod 2**64; two different windows share a hash with odds of about 2**-64)."""
    count = len(data) - n + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    h = np.zeros(count, dtype=np.uint64)
    base = np.uint64(1099511628211)  # the FNV prime: odd, so multiplication by it is a bijection mod 2**64
    for i in range(n):
        h = h * base + data[i : i + count].astype(np.uint64)
    return h


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

    def overlap(self, n: int = NGRAM) -> float:
        """The share of the held-out stream's ``n``-byte sequences (every position) that occur
        anywhere in the training stream."""
        return _overlap(self, n)

    def record(self) -> dict:
        """What a run stores about its corpus: digest, size, the held-out n-gram overlap, and the
        training and held-out documents."""
        held = set(self.held_out)
        return {"name": self.name, "digest": self.digest, "bytes": self.n_bytes, "train_bytes": len(self.train),
                "held_out_bytes": len(self.test), f"held_out_{NGRAM}gram_overlap": round(self.overlap(), 4),
                "train_documents": [d for d in self.documents if d not in held],
                "held_out_documents": list(self.held_out)}


@lru_cache(maxsize=None)
def _overlap(corpus: Corpus, n: int) -> float:
    test = ngram_hashes(corpus.test, n)
    if not len(test):
        return 0.0
    train = np.sort(ngram_hashes(corpus.train, n))  # (N,) sorted, so each held-out hash is one binary search
    at = np.minimum(np.searchsorted(train, test), len(train) - 1)
    return float((train[at] == test).mean())


class CorpusRefused(ValueError):
    """The corpus on this machine is missing or is not the one a task pins."""


@lru_cache(maxsize=None)
def load(name: str) -> Corpus:
    """The corpus ``name`` as this machine has it (read once per process)."""
    if name not in SOURCES:
        raise ValueError(f"unknown corpus {name!r}; valid: {', '.join(sorted(SOURCES))}")
    try:
        docs = SOURCES[name].read()
    except (OSError, ImportError) as err:
        raise CorpusRefused(f"corpus {name!r} is missing ({type(err).__name__}: {err}); expected digest "
                            f"{PINNED.get(name)}; {SOURCES[name].install}") from None
    if not docs:
        raise CorpusRefused(f"corpus {name!r} is missing (no documents found); expected digest {PINNED.get(name)}; "
                            f"{SOURCES[name].install}")
    return Corpus.of(name, docs)


def checked(name: str, digest: str) -> Corpus:
    """The corpus ``name``, refused unless its content digest is ``digest``."""
    corpus = load(name)
    if corpus.digest != digest:
        raise CorpusRefused(
            f"corpus {name!r} has another content digest than the task pins: expected {digest}, found "
            f"{corpus.digest} ({len(corpus.documents)} documents, {corpus.n_bytes:,} bytes, Python "
            f"{platform.python_version()}); {SOURCES[name].install}, or set task.digest to the digest found to run on "
            "this text as another configuration")
    return corpus


def describe(name: str) -> str:
    """One line: the corpus's source, licence, size, digest, split and held-out n-gram overlap."""
    c = load(name)
    return (f"{name}: {SOURCES[name].what}, licence {SOURCES[name].licence}; {len(c.documents)} documents, "
            f"{c.n_bytes:,} bytes; digest {c.digest}; held out {len(c.held_out)} documents ({len(c.test):,} bytes of "
            f"stream), training {len(c.documents) - len(c.held_out)} documents ({len(c.train):,} bytes of stream); "
            f"{c.overlap():.1%} of the held-out {NGRAM}-byte sequences occur in training")


if __name__ == "__main__":
    for corpus_name in SOURCES:
        print(describe(corpus_name))
